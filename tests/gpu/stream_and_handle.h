#pragma once

// A CUDA stream and a cuDNN handle on it for the GPU tests that drive CudnnRecurrent or
// FusedRnn directly, destroyed after what a test built on them.

#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace rnnserve::testing {

struct StreamAndHandle {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  StreamAndHandle() {
    if (cudaStreamCreate(&stream) != cudaSuccess) stream = nullptr;
    if (stream && cudnnCreate(&handle) == CUDNN_STATUS_SUCCESS) cudnnSetStream(handle, stream);
  }
  ~StreamAndHandle() {
    if (handle) cudnnDestroy(handle);
    if (stream) cudaStreamDestroy(stream);
  }
  StreamAndHandle(const StreamAndHandle&) = delete;
  StreamAndHandle& operator=(const StreamAndHandle&) = delete;
  bool ok() const { return stream != nullptr && handle != nullptr; }
};

}  // namespace rnnserve::testing
