#include "server/services/kserve_sequences.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "server/stream_window.h"

namespace rnnserve::server {

absl::Status ManagedSequences::Run(const Servable& servable,
                                   const kserve::SequenceIdentity& sequence,
                                   const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                                   const RunOptions& options,
                                   std::shared_ptr<const Servable>* ran_on) {
  if (!servable.streamable().ok()) return servable.streamable();
  if (batch.inputs.empty() || batch.inputs[0].dim(0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", sequence.ToString(), ": a sequence request carries one sequence (batch 1)"));
  }
  // String ids share the numeric id space through a hash with the top bit set.
  const uint64_t id = sequence.id != 0
                          ? sequence.id
                          : (std::hash<std::string>{}(sequence.string_id) | (uint64_t{1} << 63));
  const SequenceManager::Limits limits = SequenceLimitsOf(servable);
  const SequenceManager::Caller caller{.owner = sequence.caller, .client = sequence.caller};
  auto lease = manager_->Acquire(servable.name(), id, sequence.start, servable.shared_from_this(),
                                 limits, caller);
  if (!lease.ok()) return lease.status();
  *ran_on = lease->servable;
  int64_t chunk_steps = 0;
  if (auto s = CheckStreamWindow(*lease->servable, batch, lease->steps, &chunk_steps); !s.ok()) {
    // The sequence stays as it was, for a corrected retry.
    manager_->Release(servable.name(), id, std::move(lease->states), false, false);
    return s;
  }
  engine::Batch chunk = batch;
  chunk.initial_states = std::move(lease->states);
  chunk.continues = !sequence.start;
  LayerStates final_states;
  chunk.final_states = &final_states;
  const absl::Status s = lease->servable->Run(std::move(chunk), outputs, options);
  manager_->Release(servable.name(), id, std::move(final_states), sequence.end, !s.ok(),
                    chunk_steps);
  return s;
}

}  // namespace rnnserve::server
