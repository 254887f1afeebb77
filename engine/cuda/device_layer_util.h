#pragma once

// What the GPU engine's device layers share (device_layers.cc: Keras layers;
// device_tensor_ops.cc: ONNX tensor ops): uploads, index maps, mask bookkeeping and the copy,
// softmax and broadcast launches both use. Internal to engine/cuda.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/dev_value.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

// An activation as the kernels take it (device_activation.cuh mirrors ActivationKind).
DeviceActivation KernelActivation(const Activation& a);

// Copies `bytes` from the host into dst (reserved to at least one byte).
absl::Status Upload(const void* src, size_t bytes, DeviceBuffer* dst, cudaStream_t stream);
absl::Status UploadFloats(const std::vector<float>& v, DeviceBuffer* dst, cudaStream_t stream);

// The strided view of `dims` with `strides` as a kernel index map; false past the rank limit.
bool ToMap(const Shape& dims, const std::vector<int64_t>& strides, IndexMap* map);

// out's device data = in's (out already sized).
absl::Status CopyOnDevice(const DevValue& in, DevValue* out, cudaStream_t stream);

// The Keras mask (lengths, step mask) of `in` onto `out`; DropMask clears out's.
void KeepMask(const DevValue& in, DevValue* out);
void DropMask(DevValue* out);

// Softmax of `out` (already holding the input) over `axis` of its shape.
absl::Status SoftmaxInPlace(DevValue& out, int axis, bool coerce_2d, bool log, bool double_sum,
                            cudaStream_t stream);

// out [outer, row] gets each input's [outer, chunk] block after the previous ones'.
absl::Status ConcatRows(const std::vector<const float*>& srcs, const std::vector<int64_t>& chunks,
                        int64_t outer, int64_t row, float* dst, cudaStream_t stream);

// out = a op b with numpy broadcasting to `shape` (a and b of shape's rank or less); false past
// the rank limit.
absl::StatusOr<bool> BroadcastBinary(const float* a, const Shape& as, const float* b,
                                     const Shape& bs, const Shape& shape, float* out, BinaryOp op,
                                     cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
