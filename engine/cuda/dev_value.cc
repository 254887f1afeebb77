#include "engine/cuda/dev_value.h"

#include <algorithm>
#include <utility>

namespace rnnserve::engine::cuda {

absl::Status SetDevice(DevValue* v, DType dtype, Shape shape) {
  v->dtype = dtype;
  v->shape = std::move(shape);
  v->host_valid = false;
  v->input = nullptr;
  v->dev_valid = true;
  return v->dev.Reserve(std::max<int64_t>(v->bytes(), 1));
}

absl::Status ToDevice(DevValue* v, cudaStream_t stream) {
  if (v->dev_valid) return absl::OkStatus();
  if (!v->host_valid) return absl::InternalError("value is neither on the host nor the device");
  RNNSERVE_RETURN_IF_ERROR(NotWhileCapturing(stream, "an upload"));
  RNNSERVE_RETURN_IF_ERROR(v->dev.Reserve(std::max<int64_t>(v->bytes(), 1)));
  const Tensor& h = v->host_tensor();
  const void* src = v->dtype == DType::kFloat32 ? static_cast<const void*>(h.f32())
                                                : static_cast<const void*>(h.i64());
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaMemcpyAsync(v->dev.get(), src, v->bytes(), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync (host to device)"));
  v->dev_valid = true;
  return absl::OkStatus();
}

absl::Status ToHost(DevValue* v, cudaStream_t stream) {
  if (v->host_valid) return absl::OkStatus();
  if (!v->dev_valid) return absl::InternalError("value is neither on the host nor the device");
  v->input = nullptr;
  v->host = v->dtype == DType::kFloat32 ? Tensor::Float(v->shape) : Tensor::Int64(v->shape);
  void* dst = v->dtype == DType::kFloat32 ? static_cast<void*>(v->host.f32())
                                          : static_cast<void*>(v->host.i64());
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaMemcpyAsync(dst, v->dev.get(), v->bytes(), cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync (device to host)"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  v->host_valid = true;
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cuda
