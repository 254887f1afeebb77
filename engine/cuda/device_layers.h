#pragma once

// The GPU engine's non-recurrent layers beyond Dense, Embedding and activations: Keras's
// BatchNormalization, LayerNormalization, Softmax, Conv1D, pooling, Flatten, Reshape,
// RepeatVector and merges, and the generic tensor ops of ONNX graphs. Each keeps its values on
// the device (kernels in layer_kernels.cu, cuBLAS for the matrix products) and reuses the CPU
// engine's shape planning and checks, so both engines accept, reject and compute alike.
//
// Tensor ops follow one rule: FP32 data lives on the device, INT64 tensors (shapes, axes,
// indices, lengths) on the host. An op over FP32 data runs here; an op whose data operands are
// INT64 is shape arithmetic and runs on the host, where its operands already are. Shape reads
// only its operand's shape, so it never moves data either way.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/dev_value.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

// What a layer keeps on the device between batches.
struct DeviceLayerState {
  DeviceBuffer params_a, params_b;  // uploaded at load (scale/shift, gamma/beta, kernel/bias)
  DeviceBuffer scratch, scratch_b;  // per batch: im2col columns, indices, lengths, step mask
  // A tensor op's FP32 constant operands, uploaded at load, by operand index (empty where the
  // operand is not an FP32 constant).
  std::vector<DeviceBuffer> constants;
};

// Where a layer runs and why, as the model's metadata says.
struct DevicePlacement {
  bool on_device = false;  // false: the host runs it (through the CPU engine's layer)
  std::string reason;
};

// y [rows, cols] = act(y + bias) elementwise (bias [cols] may be null); a softmax activation
// normalises each row. The tail of Dense, Conv1D and Activation layers.
absl::Status BiasAndActivation(float* y, const float* bias, int64_t rows, int cols,
                               const Activation& act, cudaStream_t stream);

// Plans `layer` (any spec but Recurrent, Dense, Embedding, Activation, Identity, Masking):
// validates it, uploads what it needs into `state`. A layer without a device form is placed on
// the host.
absl::StatusOr<DevicePlacement> PlanDeviceLayer(const Layer& layer, cudaStream_t stream,
                                                DeviceLayerState* state);

// Runs a layer PlanDeviceLayer placed on the device over the model's `values`. Returns false,
// having done nothing, when this batch's operands keep it on the host (a tensor op over INT64
// tensors, or one past the kernels' rank limit); the caller then runs the CPU engine's layer.
absl::StatusOr<bool> RunDeviceLayer(const Layer& layer, cudaStream_t stream, cublasHandle_t cublas,
                                    DeviceLayerState& state, std::vector<DevValue>& values);

}  // namespace rnnserve::engine::cuda
