#pragma once

// The GPU engine's form of the generic tensor ops of ONNX graphs (TensorOpSpec), under
// device_layers.h's rule: FP32 data on the device, INT64 shape arithmetic on the host, Shape
// reading only its operand's shape. Shape planning and operand checks are the CPU engine's.
// Internal to engine/cuda (device_layers.cc dispatches here).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/dev_value.h"
#include "engine/cuda/device_layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

// Uploads the op's FP32 constant operands into state->constants; says where the op runs.
absl::StatusOr<DevicePlacement> PlanDeviceTensorOp(const TensorOpSpec& spec, cudaStream_t stream,
                                                   DeviceLayerState* state);

// Runs the op on the device; false, having done nothing, when this batch's operands keep it on
// the host (INT64 data, a Cast to a non-float type, past the kernels' rank limit).
absl::StatusOr<bool> RunDeviceTensorOp(const Layer& layer, const TensorOpSpec& spec,
                                       cudaStream_t stream, cublasHandle_t cublas,
                                       DeviceLayerState& state, std::vector<DevValue>& values);

}  // namespace rnnserve::engine::cuda
