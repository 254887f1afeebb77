#pragma once

// Which models the resident step loop (resident_loop.h) runs whole: one input, identity layers,
// and one recurrent layer the loop runs, every model output one of that layer's outputs (its
// sequence or last output, then h and, for LSTM, c). Others keep the chunked path.

#include <string>
#include <vector>

#include "engine/ir.h"

namespace rnnserve::engine::cuda {

struct ResidentPlan {
  const Layer* layer = nullptr;  // null: the loop does not run the model (why says why)
  std::string why;
  // Per model output, which of the layer's outputs it is: 0 its output (the sequence when
  // return_sequences, else the last h), 1 h, 2 c.
  std::vector<int> outputs;
};

ResidentPlan PlanResident(const Model& model);

}  // namespace rnnserve::engine::cuda
