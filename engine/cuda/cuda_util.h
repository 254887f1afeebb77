#pragma once

// Small CUDA/cuDNN/cuBLAS helpers for the GPU engine: status conversion and an owning device
// buffer. Every CUDA, cuDNN or cuBLAS failure becomes absl::InternalError naming the call, so a
// failing batch returns INTERNAL with a message instead of crashing the process.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RNNSERVE_RETURN_IF_ERROR(expr)          \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (0)

namespace rnnserve::engine::cuda {

// Whether `stream` is being captured into a graph (true when CUDA cannot say: callers then take
// the path that is safe inside a capture).
inline bool StreamCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
         capturing != cudaStreamCaptureStatusNone;
}

// FAILED_PRECONDITION while `stream` is being captured into a graph: a copy from host memory the
// graph does not own (a vector of this batch, pageable memory) must not be baked into it. The
// compiled model then runs the batch eagerly (cuda_model_graph.cc).
inline absl::Status NotWhileCapturing(cudaStream_t stream, const char* what) {
  if (StreamCapturing(stream)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from host memory while the batch is captured into a graph"));
  }
  return absl::OkStatus();
}

inline absl::Status CudaOk(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

inline absl::Status CudnnOk(cudnnStatus_t st, const char* what) {
  if (st == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuDNN error ", cudnnGetErrorString(st)));
}

inline absl::Status CublasOk(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS error ", cublasGetStatusName(st)));
}

// Row-major Y [rows, n] = X [rows, k] . W [k, n] (all on the device), as the column-major
// product Y^T = W^T . X^T; in the handle's math mode.
inline absl::Status RowMajorGemm(cublasHandle_t cublas, const float* x, const float* w, float* y,
                                 int64_t rows, int64_t k, int64_t n, const char* what) {
  if (rows == 0 || n == 0) return absl::OkStatus();
  const float one = 1.0f, zero = 0.0f;
  return CublasOk(
      cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                  static_cast<int>(k), &one, w, static_cast<int>(n), x, static_cast<int>(k), &zero,
                  y, static_cast<int>(n)),
      what);
}

// Device memory that grows on demand and is otherwise reused: Reserve() reallocates only when
// asked for more bytes than it holds, so steady-state batches never call cudaMalloc.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Release();
    void* p = nullptr;
    if (auto s = CudaOk(cudaMalloc(&p, bytes), "cudaMalloc"); !s.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("device allocation of ", bytes, " bytes failed: ", s.message()));
    }
    ptr_ = p;
    bytes_ = bytes;
    Generation().fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // Counts device allocations and frees of every DeviceBuffer in the process: a captured graph
  // bakes in buffer addresses, and is stale once this has moved since its capture.
  static std::atomic<uint64_t>& Generation() {
    static std::atomic<uint64_t> generation{0};
    return generation;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Release() {
    if (ptr_ != nullptr) {
      cudaFree(ptr_);
      Generation().fetch_add(1, std::memory_order_relaxed);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace rnnserve::engine::cuda
