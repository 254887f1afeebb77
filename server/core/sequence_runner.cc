#include "server/core/sequence_runner.h"

#include "server/sequence_manager.h"
#include "server/servable.h"
#include "server/stream_window.h"

namespace rnnserve::server::core {

absl::Status RunChunk(StateStore& store, const Chunk& chunk, engine::Batch batch,
                      const RunOptions& options, std::vector<engine::Tensor>* outputs,
                      std::shared_ptr<const Servable>* ran_on) {
  const std::string& model = chunk.servable->name();
  auto lease = store.Acquire(model, chunk.id, chunk.start, chunk.servable,
                             SequenceLimitsOf(*chunk.servable), chunk.caller);
  if (!lease.ok()) return lease.status();
  *ran_on = lease->servable;
  int64_t chunk_steps = 0;
  if (auto s = CheckStreamWindow(*lease->servable, batch, lease->steps, &chunk_steps); !s.ok()) {
    // The sequence stays as it was; a store that fails here has lost nothing new.
    (void)store.Release(model, chunk.id, std::move(lease->states), false, false);
    return s;
  }
  batch.initial_states = std::move(lease->states);
  batch.continues = !chunk.start;
  LayerStates final_states;
  batch.final_states = &final_states;
  const absl::Status s = lease->servable->Run(std::move(batch), outputs, options);
  const absl::Status released =
      store.Release(model, chunk.id, std::move(final_states), chunk.end, !s.ok(), chunk_steps);
  return s.ok() ? released : s;
}

}  // namespace rnnserve::server::core
