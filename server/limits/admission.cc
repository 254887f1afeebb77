#include "server/limits/admission.h"

#include "server/limits/working_memory.h"

namespace rnnserve::server::limits {
namespace {

int64_t TensorBytes(const engine::Tensor& t) {
  return t.num_elements() * (t.dtype() == engine::DType::kInt64 ? 8 : 4);
}

}  // namespace

int64_t BatchBytes(const engine::Batch& batch) {
  int64_t bytes = static_cast<int64_t>(batch.lengths.size() * sizeof(int32_t));
  for (const engine::Tensor& t : batch.inputs) bytes += TensorBytes(t);
  for (const auto& [layer, states] : batch.initial_states) {
    for (const engine::Tensor& t : states) bytes += TensorBytes(t);
  }
  return bytes;
}

absl::Status Admission::AddBatch(const engine::Batch& batch) {
  return bytes.Add(BatchBytes(batch) + (ir != nullptr ? WorkingBytes(*ir, batch) : 0));
}

absl::StatusOr<Admission> Admit(const RequestLimits& limits, const Servable& model,
                                const std::string& caller, int64_t request_bytes) {
  Admission admission;
  admission.ir = &model.ir();
  auto reservation = ReserveIn(limits.bytes, caller, request_bytes);
  if (!reservation.ok()) return reservation.status();
  admission.bytes = *std::move(reservation);
  if (limits.concurrency != nullptr && model.scheduler_kind() == batching::SchedulerKind::kDirect) {
    auto slot = limits.concurrency->Acquire(&model, model.name(),
                                            static_cast<int>(model.instances().size()), caller);
    if (!slot.ok()) return slot.status();
    admission.slot = *std::move(slot);
  }
  return admission;
}

}  // namespace rnnserve::server::limits
