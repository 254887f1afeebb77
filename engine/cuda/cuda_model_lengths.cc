// The request-lengths ops (engine/lengths_rewrite.h) on the device: a last-step read at each
// sequence's length and the zeroing of per-step outputs past it. The lengths are uploaded as
// the batch's own (a whole-batch graph re-reads them at each replay), so a model with these ops
// still replays its graphs.

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::cuda {

absl::Status CudaCompiledModel::RunLengthsOp(const Layer& layer, const TensorOpSpec& op,
                                             const Batch& batch) {
  if (layer.inputs.size() != 2 || layer.outputs.size() != 1 ||
      values_[layer.inputs[0]].dtype != DType::kFloat32) {
    return RunCpuLayer(layer);  // INT64 data, or a malformed layer: the host says why
  }
  DevValue& x = values_[layer.inputs[0]];
  const std::vector<int32_t>& request = values_[layer.inputs[1]].lengths;
  auto p = plan::PlanLengthsOp(op, x.shape, request);
  if (!p.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "': ", p.status().message()));
  }
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&x));
  // The request's lengths (a graph's replay copies the next batch's in), else T for each
  // sequence, which the batch's shape fixes.
  const size_t bytes = p->lengths.size() * sizeof(int32_t);
  RNNSERVE_RETURN_IF_ERROR(request_lengths_dev_.Reserve(std::max<size_t>(bytes, 1)));
  const UploadKind kind = request.empty()            ? UploadKind::kConstant
                          : request == batch.lengths ? UploadKind::kLengths
                                                     : UploadKind::kOther;
  RNNSERVE_RETURN_IF_ERROR(CopyToDevice(request_lengths_dev_.get(), p->lengths.data(), bytes,
                                        "cudaMemcpyAsync (request lengths)", kind));
  DevValue& out = values_[layer.outputs[0]];
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, p->out));
  out.lengths.clear();
  out.step_mask.clear();
  const int64_t n0 = p->time_first ? p->T : p->B, n1 = p->time_first ? p->B : p->T;
  const cudaError_t e =
      op.kind == TensorOpKind::kGatherAtLengths
          ? LaunchGatherAtLengths(x.dev.as<float>(), request_lengths_dev_.as<int32_t>(),
                                  out.dev.as<float>(), p->outer, n0, p->mid, n1, p->inner,
                                  p->time_first, stream_)
          : LaunchZeroPastLengths(x.dev.as<float>(), request_lengths_dev_.as<int32_t>(),
                                  out.dev.as<float>(), p->outer, n0, p->mid, n1, p->inner,
                                  p->time_first, stream_);
  return CudaOk(e, "request lengths kernel");
}

}  // namespace rnnserve::engine::cuda
