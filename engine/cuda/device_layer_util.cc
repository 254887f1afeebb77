#include "engine/cuda/device_layer_util.h"

#include <algorithm>

#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::cuda {

static_assert(static_cast<int>(ActivationKind::kExponential) == 15 &&
                  static_cast<int>(ActivationKind::kSoftmax) == 16,
              "device_activation.cuh mirrors ActivationKind's values");

DeviceActivation KernelActivation(const Activation& a) {
  return DeviceActivation{static_cast<int>(a.kind), a.alpha, a.beta};
}

absl::Status Upload(const void* src, size_t bytes, DeviceBuffer* dst, cudaStream_t stream) {
  RNNSERVE_RETURN_IF_ERROR(NotWhileCapturing(stream, "a layer's upload"));
  RNNSERVE_RETURN_IF_ERROR(dst->Reserve(std::max<size_t>(bytes, 1)));
  if (bytes == 0) return absl::OkStatus();
  return CudaOk(cudaMemcpyAsync(dst->get(), src, bytes, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync (layer parameters)");
}

absl::Status UploadFloats(const std::vector<float>& v, DeviceBuffer* dst, cudaStream_t stream) {
  return Upload(v.data(), v.size() * sizeof(float), dst, stream);
}

bool ToMap(const Shape& dims, const std::vector<int64_t>& strides, IndexMap* map) {
  if (dims.size() > static_cast<size_t>(kMaxKernelRank)) return false;
  map->rank = static_cast<int>(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    map->dim[a] = dims[a];
    map->stride[a] = strides[a];
  }
  return true;
}

absl::Status CopyOnDevice(const DevValue& in, DevValue* out, cudaStream_t stream) {
  if (in.bytes() == 0) return absl::OkStatus();
  return CudaOk(
      cudaMemcpyAsync(out->dev.get(), in.dev.get(), in.bytes(), cudaMemcpyDeviceToDevice, stream),
      "cudaMemcpyAsync (device copy)");
}

void KeepMask(const DevValue& in, DevValue* out) {
  out->lengths = in.lengths;
  out->step_mask = in.step_mask;
}

void DropMask(DevValue* out) {
  out->lengths.clear();
  out->step_mask.clear();
}

absl::Status SoftmaxInPlace(DevValue& out, int axis, bool coerce_2d, bool log, bool double_sum,
                            cudaStream_t stream) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < static_cast<int>(out.shape.size()); ++i) {
    if (i < axis) outer *= out.shape[i];
    if (i == axis) n = out.shape[i];
    if (i > axis) inner *= out.shape[i];
  }
  if (coerce_2d) n *= inner, inner = 1;
  return CudaOk(LaunchSoftmaxAxis(out.dev.as<float>(), outer, n, inner, log, double_sum, stream),
                "softmax kernel");
}

absl::Status ConcatRows(const std::vector<const float*>& srcs, const std::vector<int64_t>& chunks,
                        int64_t outer, int64_t row, float* dst, cudaStream_t stream) {
  int64_t at = 0;
  for (size_t k = 0; k < srcs.size(); ++k) {
    const int64_t chunk = chunks[k];
    if (chunk > 0 && outer > 0) {
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemcpy2DAsync(dst + at, row * sizeof(float), srcs[k], chunk * sizeof(float),
                                   chunk * sizeof(float), outer, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpy2DAsync (concatenate)"));
    }
    at += chunk;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BroadcastBinary(const float* a, const Shape& as, const float* b,
                                     const Shape& bs, const Shape& shape, float* out, BinaryOp op,
                                     cudaStream_t stream) {
  IndexMap ma, mb;
  if (!ToMap(shape, plan::BroadcastStrides(as, shape), &ma) ||
      !ToMap(shape, plan::BroadcastStrides(bs, shape), &mb)) {
    return false;
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchBinary(a, ma, b, mb, out, op, stream), "binary kernel"));
  return true;
}

}  // namespace rnnserve::engine::cuda
