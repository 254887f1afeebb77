#pragma once

// Step feedback: sequences of the step-level scheduler (cellular_scheduler.h) whose inputs past
// their first ones are chosen step by step from their own outputs, as a language model's
// sampled token is fed back as its next step's input (server/generation/).
//
// A feedback request is a BatchRequest whose inputs ([B, T, ...], T >= 1, no lengths) are each
// row's first steps (a prompt); its rows take slots and run those steps in chunks like any
// sequence. After the chunk in which a row ran the last step it has, the scheduler calls the
// request's StepFeedback with that step's outputs; the hook either gives the row one more step
// of input, which the row runs in the next chunk from the states its slot holds, or ends the
// row, whose slot is free for the next chunk. The request's `done` is called once: with no
// outputs (an empty vector) when every row has ended, or with why it stopped (its deadline, its
// `cancelled`, an engine fault, the model unloading: as for any request of the scheduler, a row
// leaves its slot before the next chunk). Rows start from their request's initial states, or
// zeros; final_states, when set, receives each row's states after its last step.

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace rnnserve::server::batching {

class StepFeedback {
 public:
  virtual ~StepFeedback() = default;
  // Called on a scheduler worker when row `row` has run every step it has. `outputs`: that
  // step's row of each model output, [1, ...] (a per-step output's time axis dropped). To run
  // one more step, fill *next with one tensor per model input, [1, 1, ...] of the request's
  // input's dtype and feature shape, and return true; return false to end the row. Calls for
  // one row come one at a time, after the previous one returned; calls for different rows of
  // one request may come at once from different workers (each instance has one). Must not
  // block, and must not call into the scheduler.
  virtual bool Next(int64_t row, const std::vector<engine::Tensor>& outputs,
                    std::vector<engine::Tensor>* next) = 0;
};

}  // namespace rnnserve::server::batching
