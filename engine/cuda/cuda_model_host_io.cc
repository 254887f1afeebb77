// CudaCompiledModel's host side of a run: inputs copied to the device, outputs downloaded into
// pinned host tensors and handed back.

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"

namespace rnnserve::engine::cuda {

void CudaCompiledModel::CollectOutputs(std::vector<Tensor>* outputs) {
  outputs->clear();
  for (size_t i = 0; i < model_.output_values.size(); ++i) {
    DevValue& v = values_[model_.output_values[i]];
    if (v.input != nullptr) {
      outputs->push_back(*v.input);  // the caller's own input is also an output
    } else if (v.host_valid) {
      outputs->push_back(std::move(v.host));
      v.host_valid = false;
    } else {  // the same value named twice: already moved out
      const auto first = std::find(model_.output_values.begin(), model_.output_values.end(),
                                   model_.output_values[i]);
      outputs->push_back((*outputs)[first - model_.output_values.begin()]);
    }
  }
}

absl::Status CudaCompiledModel::ToDevice(DevValue* v) {
  const bool large = static_cast<size_t>(v->bytes()) > PinnedStaging::kMaxBytes;
  if (v->dev_valid || !v->host_valid || large ||
      (v->host_tensor().wrapped() && capture_ == nullptr)) {
    if (v->host_valid && !v->dev_valid) NotReplayable("an upload not through the staging area");
    return cuda::ToDevice(v, stream_);  // pinned already, large, or nothing to do
  }
  RNNSERVE_RETURN_IF_ERROR(v->dev.Reserve(std::max<int64_t>(v->bytes(), 1)));
  // A batch input (a graph replays it from the next batch's input of that index), or a value
  // that follows from the batch's shapes alone (the graph keeps its bytes).
  UploadKind kind = clean_[v - values_.data()] ? UploadKind::kConstant : UploadKind::kOther;
  int index = 0;
  for (size_t i = 0; batch_ != nullptr && i < batch_->inputs.size(); ++i) {
    if (v->input == &batch_->inputs[i]) {
      kind = UploadKind::kInput;
      index = static_cast<int>(i);
    }
  }
  const Tensor& h = v->host_tensor();
  RNNSERVE_RETURN_IF_ERROR(
      CopyToDevice(v->dev.get(),
                   v->dtype == DType::kFloat32 ? static_cast<const void*>(h.f32())
                                               : static_cast<const void*>(h.i64()),
                   v->bytes(), "cudaMemcpyAsync (host to device)", kind, index));
  v->dev_valid = true;
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::CopyToDevice(void* dst, const void* src, size_t bytes,
                                             const char* what, UploadKind kind, int index) {
  if (bytes == 0) return absl::OkStatus();
  PinnedStaging& area = staging();
  const void* staged = area.Stage(src, bytes);
  if (capture_ != nullptr) {
    if (staged == nullptr) {
      NotReplayable("an upload larger than the graph's area");
    } else if (kind == UploadKind::kOther) {
      NotReplayable("an upload the batch's shape does not fix (states, masks, derived lengths)");
    } else if (kind != UploadKind::kConstant) {
      using Kind = ModelGraph::Source::Kind;
      const Kind k = kind == UploadKind::kInput     ? Kind::kInput
                     : kind == UploadKind::kLengths ? Kind::kLengths
                                                    : Kind::kSlots;
      capture_->graph->sources.push_back({k, index, area.OffsetOf(staged), bytes});
    }
  }
  return CudaOk(cudaMemcpyAsync(dst, staged != nullptr ? staged : src, bytes,
                                cudaMemcpyHostToDevice, stream_),
                what);
}

absl::Status CudaCompiledModel::EnqueueDownloads() {
  for (int id : model_.output_values) {
    DevValue& v = values_[id];
    if (v.host_valid) continue;
    if (!v.dev_valid) return absl::InternalError("an output is neither on the host nor the device");
    auto pinned = pinned_->NewTensor(v.dtype, v.shape);
    if (!pinned.ok()) {  // the host cannot pin more: a pageable copy
      RNNSERVE_RETURN_IF_ERROR(ToHost(&v));
      continue;
    }
    void* dst = v.dtype == DType::kFloat32 ? static_cast<void*>(pinned->f32())
                                           : static_cast<void*>(pinned->i64());
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemcpyAsync(dst, v.dev.get(), v.bytes(), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (output to host)"));
    v.input = nullptr;
    v.host = *std::move(pinned);
    v.host_valid = true;
  }
  return absl::OkStatus();
}

Tensor CudaCompiledModel::NewHostTensor(DType dtype, Shape shape) const {
  auto pinned = pinned_->NewTensor(dtype, shape);
  if (!pinned.ok()) return CompiledModel::NewHostTensor(dtype, std::move(shape));
  void* data = dtype == DType::kFloat32 ? static_cast<void*>(pinned->f32())
                                        : static_cast<void*>(pinned->i64());
  std::memset(data, 0, NumElements(pinned->shape()) * (dtype == DType::kFloat32 ? 4 : 8));
  return *std::move(pinned);
}

}  // namespace rnnserve::engine::cuda
