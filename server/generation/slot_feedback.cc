#include "server/generation/slot_feedback.h"

#include "server/generation/model_step.h"

namespace rnnserve::server::generation {

bool SlotFeedback::Next(int64_t row, const std::vector<engine::Tensor>& outputs,
                        std::vector<engine::Tensor>* next) {
  Generation& g = *g_;
  const engine::Tensor& out = outputs[0];  // [1, V]: the step's next-token row
  StepEvent event;
  const bool goes_on = g.SampleNext(static_cast<size_t>(row),
                                    std::span<const float>(out.f32(), out.num_elements()), &event);
  g.Push(std::move(event));
  if (!goes_on) return false;
  next->push_back(IdsTensor(g.kind_, 1, 1, {g.samples_[row].context.back()}));
  return true;
}

std::unique_ptr<batching::BatchRequest> SlotFeedback::Request(
    const std::shared_ptr<Generation>& g,
    absl::AnyInvocable<void(absl::StatusOr<std::vector<engine::Tensor>>)> done) {
  const std::vector<int64_t>& prompt = g->params_.prompt_ids;
  const int64_t n = static_cast<int64_t>(g->samples_.size());
  std::vector<int64_t> ids;
  ids.reserve(n * prompt.size());
  for (int64_t r = 0; r < n; ++r) ids.insert(ids.end(), prompt.begin(), prompt.end());
  auto request = std::make_unique<batching::BatchRequest>();
  request->batch.inputs.push_back(IdsTensor(g->kind_, n, static_cast<int64_t>(prompt.size()), ids));
  request->deadline = g->deadline_;
  request->cancelled = [g = g.get()] { return g->cancelled_.load(std::memory_order_relaxed); };
  request->may_run_on_caller = false;
  request->done = std::move(done);
  return request;
}

}  // namespace rnnserve::server::generation
