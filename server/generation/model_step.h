#pragma once

// The engine calls of generation (generator.h): a stateful LM's prompt, and one step of many
// samples of one model, through Servable::Run.

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/generation/generator.h"

namespace rnnserve::server::generation {

// ids [B, T] in the model's input dtype.
engine::Tensor IdsTensor(const ModelKind& kind, int64_t b, int64_t t,
                         const std::vector<int64_t>& ids);

class ModelStep {
 public:
  // Runs stateful LMs' prompts (all of one model; prompts of one length together, in engine
  // calls of at most max_batch_size rows) and gives every sample its states and the output row
  // after its prompt's last token. The generations of a call that failed go to *failed.
  static void RunPrompts(const std::vector<Generation*>& gens,
                         std::vector<std::pair<Generation*, absl::Status>>* failed);
  // Fills the output row of every sample in `rows` (all of `model`, each without a row):
  // stateful, one step from its last token and its states; window, its last W tokens. One
  // engine call per max_batch_size rows.
  static absl::Status Step(const Servable& model, const ModelKind& kind,
                           const std::vector<Generation::Sample*>& rows);

 private:
  static absl::Status StepPart(const Servable& model, const ModelKind& kind,
                               Generation::Sample* const* rows, int64_t b);
};

}  // namespace rnnserve::server::generation
