#pragma once

// A stateful LM's generation as a feedback request of its model's step-level scheduler
// (server/batching/cellular_feedback.h): one row per sample, the prompt as every row's given
// steps; after each row's step the hook chooses the sample's next token from the step's output
// row (Generation::SampleNext), streams it, and feeds it back as the row's next input, until
// the sample stops (max_tokens, a stop token or string).

#include <memory>
#include <vector>

#include "server/batching/batch_request.h"
#include "server/batching/cellular_feedback.h"
#include "server/generation/generator.h"

namespace rnnserve::server::generation {

class SlotFeedback final : public batching::StepFeedback {
 public:
  explicit SlotFeedback(std::shared_ptr<Generation> g) : g_(std::move(g)) {}
  bool Next(int64_t row, const std::vector<engine::Tensor>& outputs,
            std::vector<engine::Tensor>* next) override;

  // The request of `g`'s samples: ids [n, prompt] in the model's input dtype, its deadline and
  // its cancel; `done` ends it.
  static std::unique_ptr<batching::BatchRequest> Request(
      const std::shared_ptr<Generation>& g,
      absl::AnyInvocable<void(absl::StatusOr<std::vector<engine::Tensor>>)> done);

 private:
  const std::shared_ptr<Generation> g_;
};

}  // namespace rnnserve::server::generation
