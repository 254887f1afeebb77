#pragma once

// A resident step loop: an engine instance that keeps a model running step by step and lets
// sequences join and leave between steps, with no engine call per chunk (the GPU engine's:
// engine/cuda/resident_loop.h). Step-level batching uses it where an instance offers one
// (StepLoopSource) and keeps its chunked engine calls elsewhere.
//
// Sequences start from zero states. Join and Done are for one thread at a time (the feeder);
// Join on a slot whose sequence has not finished is refused.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/slot_states.h"

namespace rnnserve::engine {

class StepLoop {
 public:
  virtual ~StepLoop() = default;
  virtual int capacity() const = 0;   // slots
  virtual int max_steps() const = 0;  // the longest sequence a slot takes
  // Per model output, the shape of one step's (or one sequence's) row: no batch or time axis.
  virtual std::vector<Shape> output_rows() const = 0;
  // Row `row` of `input` ([B, T, ...], the model's one input), its first `length` steps, into
  // `slot`. INVALID_ARGUMENT for a slot, row or length out of range; FAILED_PRECONDITION while
  // the slot's previous sequence runs.
  virtual absl::Status Join(int slot, const Tensor& input, int64_t row, int length) = 0;
  // Whether the slot's last sequence has been taken into the loop / has finished.
  virtual bool Started(int slot) const = 0;
  virtual bool Done(int slot) const = 0;
  // After Done(slot): one tensor per model output, [length, ...] for an output with a time
  // axis and [1, ...] otherwise; and, when final_states is not null, the recurrent layer's
  // final states by layer name ([1, H'] h, then [1, H] c for LSTM).
  virtual absl::Status Outputs(int slot, std::vector<Tensor>* outputs,
                               StateMap* final_states) const = 0;
};

// Implemented by compiled models that can run a step loop (CudaCompiledModel).
class StepLoopSource {
 public:
  virtual ~StepLoopSource() = default;
  // Empty when this instance's model runs in a step loop; else why not (for metadata).
  virtual std::string StepLoopUnsupported() const = 0;
  // A loop of `capacity` slots for sequences of up to max_steps steps, running until
  // destroyed. FAILED_PRECONDITION naming why when StepLoopUnsupported() is not empty.
  virtual absl::StatusOr<std::unique_ptr<StepLoop>> NewStepLoop(int capacity, int max_steps) = 0;
};

}  // namespace rnnserve::engine
