#pragma once

// The data side of step-level (cellular) batching: one request's sequences as slots, and the
// gather/scatter between slots and the engine call that advances them by a chunk of steps.
//
// A slot holds one sequence of a request: where it is (steps run so far out of its length), the
// number of its recurrent states in the instance's engine::SlotStates (engine/slot_states.h:
// on the GPU they stay in device memory), and the rows of its per-step outputs computed so
// far. A chunk is one engine call over the active slots: each slot's next steps of input,
// stacked row by row and zero-padded to the chunk's steps, with each row's own length; each row
// starts from its slot's states and leaves its final states there. What comes back is cut back
// into the slots. A slot that reached its length is finished: its rows go into its request's
// outputs, and the request is answered when its last slot finishes.
//
// Past a sequence's length a per-step output repeats the output of its last step (Keras's
// masking: a masked step carries the state and repeats the last output), or is zero for an
// empty sequence; CellularSchedulerOptions::per_step_fill says which models this holds for.
//
// A feedback request's rows (cellular_feedback.h) run their given steps, then one fed step at a
// time: a slot keeps only its last step's output rows (last_rows), not its per-step outputs.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/slot_states.h"
#include "server/batching/batch_request.h"
#include "server/batching/cellular_feedback.h"
#include "server/batching/queued_request.h"

namespace rnnserve::server::batching {

using LayerStates = engine::StateMap;

// What a chunk needs to know about the model.
struct ChunkShape {
  // One per model input: whether axis 1 is the time axis (every input of a cellular model
  // has one).
  std::vector<bool> input_time_axis;
  // One per model output: whether axis 1 is the time axis (a per-step output).
  std::vector<bool> output_time_axis;
  // Per recurrent layer, the shape of each state row (batch axis left out): what a slot
  // starts from when its request gives no initial state (zeros).
  std::map<std::string, std::vector<engine::Shape>> state_rows;
};

struct Slot;

// A request split into its sequences; shared by its slots, which may run on different
// instances' workers.
class CellularRequest {
 public:
  // `feedback`: null for a request whose rows run their given steps only.
  CellularRequest(std::unique_ptr<BatchRequest> request, absl::Time enqueued,
                  std::shared_ptr<StepFeedback> feedback = nullptr);

  const engine::Batch& batch() const { return request_->batch; }
  // The steps of its inputs (T); a feedback row's steps past these are fed (Slot::fed).
  int64_t steps() const { return steps_; }
  StepFeedback* feedback() const { return feedback_.get(); }
  absl::Time deadline() const { return request_->deadline; }
  absl::Time enqueued() const { return enqueued_; }
  // The steps sequence `row` runs: its length, or T.
  int64_t length(int64_t row) const;

  // Writes a finished slot's rows of every output and final state into the answer (a feedback
  // request's: final states only). The last one (or the first failure) answers the request.
  void Finish(const Slot& slot, const ChunkShape& shape);
  void Fail(const absl::Status& status);
  // Answered already with an error: its other sequences need not run.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The caller gave up (BatchRequest::cancelled).
  bool cancelled() const { return request_->cancelled && request_->cancelled(); }

 private:
  void AnswerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<BatchRequest> request_;
  const std::shared_ptr<StepFeedback> feedback_;
  const absl::Time enqueued_;
  const int64_t rows_;
  const int64_t steps_;
  std::atomic<bool> failed_{false};
  absl::Mutex mu_;
  int64_t unfinished_ ABSL_GUARDED_BY(mu_);
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  // Allocated by the first finished slot: one per model output, [B, T, ...] or [B, ...].
  std::vector<engine::Tensor> outputs_ ABSL_GUARDED_BY(mu_);
  LayerStates final_states_ ABSL_GUARDED_BY(mu_);  // [B, ...] per state, when asked for
};

// One sequence in (or waiting for) a slot.
struct Slot {
  std::shared_ptr<CellularRequest> request;
  int64_t row = 0;
  int64_t done = 0;    // steps run so far
  int64_t length = 0;  // steps to run (a feedback row's grows by one with each fed step)
  int32_t index = -1;  // its states' slot in the instance's SlotStates
  // Its final states, each [1, ...]: read from the slot when it finishes, if its request asks.
  LayerStates states;
  // Per output: per-step outputs' rows so far, each [done, ...] (only time-axis outputs), and
  // the last chunk's row [1, ...] (the rest).
  // A feedback row's last step's rows instead, [1, ...] per output, and no pieces.
  std::vector<std::vector<engine::Tensor>> step_pieces;
  std::vector<engine::Tensor> last_rows;
  // A feedback row past its request's steps: the input of its step `done`, [1, 1, ...] per
  // model input (StepFeedback::Next).
  std::vector<engine::Tensor> fed;
  bool started = false;  // has run a chunk
  int64_t remaining() const { return length - done; }
};

// The states `fresh` slots (before their first chunk) start from, stacked row by row, for
// SlotStates::Write: per layer, their requests' initial states where one of them gives some
// (zeros for the others); a layer no request gives states for is left out (zeros).
engine::StateMap StartStates(const std::vector<Slot*>& fresh, const ChunkShape& shape);

// The engine call that advances `slots` by min(chunk_steps, longest remaining) steps: inputs
// (in `instance`'s preferred host memory) and lengths; the states are the slots'. Sets *steps.
// With `fixed`, the chunk has chunk_steps steps, except when every slot is a feedback row with
// one fed step to run: then one (a generation's token costs one step, not a chunk).
engine::Batch GatherChunk(const std::vector<Slot*>& slots, const ChunkShape& shape,
                          int64_t chunk_steps, bool fixed, const engine::CompiledModel& instance,
                          int64_t* steps);

// Cuts the chunk's outputs back into the slots (each advances by its own steps of the chunk).
// INTERNAL when the engine's outputs do not have the chunk's rows.
absl::Status ScatterChunk(const std::vector<Slot*>& slots, const ChunkShape& shape, int64_t steps,
                          const std::vector<engine::Tensor>& outputs);

// A feedback row that has run every step it has (remaining() 0; its request not failed): asks
// its request's StepFeedback for one more step, which the slot then has to run (Slot::fed), or
// leaves it finished. INTERNAL when the hook's input does not fit the request's inputs.
absl::Status FeedSlot(Slot& slot);

}  // namespace rnnserve::server::batching
