#pragma once

// A model value inside the GPU engine: a host tensor, a device copy, or both, with its Keras
// mask on the host. Device buffers are kept across batches and only grow.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/cuda/cuda_util.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cuda {

struct DevValue {
  Tensor host;
  const Tensor* input = nullptr;  // a model input: the caller's tensor, read in place
  bool host_valid = false;
  DeviceBuffer dev;
  bool dev_valid = false;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<int32_t> lengths;  // size B for a masked sequence; else empty
  // [B, T] (1 = valid) when a step inside a sequence is masked (HostValue::step_mask); cuDNN
  // cannot skip such steps, so a recurrent layer reading it runs on the CPU kernel.
  std::vector<uint8_t> step_mask;

  const Tensor& host_tensor() const { return input != nullptr ? *input : host; }
  int64_t bytes() const { return NumElements(shape) * (dtype == DType::kFloat32 ? 4 : 8); }
};

// Makes `v` a device value of this type and shape (its buffer grown as needed); the host copy
// and the mask are left to the caller.
absl::Status SetDevice(DevValue* v, DType dtype, Shape shape);
// Copies a host-only value to the device (enqueued on `stream`); no-op when already there.
absl::Status ToDevice(DevValue* v, cudaStream_t stream);
// Copies a device-only value to the host and waits for it; no-op when already there.
absl::Status ToHost(DevValue* v, cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
