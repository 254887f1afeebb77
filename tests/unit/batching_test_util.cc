#include "tests/unit/batching_test_util.h"

#include "gtest/gtest.h"

namespace rnnserve::testing {

float Value(float id, int64_t row, int64_t t) {
  return id + static_cast<float>(row) + static_cast<float>(t) / 4;
}

std::unique_ptr<server::batching::BatchRequest> MakeRequest(const RequestSpec& spec,
                                                            std::shared_ptr<Answer>* answer) {
  auto request = std::make_unique<server::batching::BatchRequest>();
  engine::Tensor x = engine::Tensor::Float({spec.rows, spec.steps, spec.features});
  for (int64_t b = 0; b < spec.rows; ++b) {
    for (int64_t t = 0; t < spec.steps; ++t) {
      x.f32()[(b * spec.steps + t) * spec.features] = Value(spec.id, b, t);
    }
  }
  request->batch.inputs.push_back(std::move(x));
  request->batch.lengths = spec.lengths;
  if (!spec.initial_h.empty()) {
    request->batch.initial_states["rnn"].push_back(
        engine::Tensor::Float({spec.rows, 1}, spec.initial_h));
  }
  request->batch.final_states = spec.final_states;
  request->deadline = spec.deadline;
  request->priority = spec.priority;
  *answer = std::make_shared<Answer>();
  request->done = [a = *answer](absl::StatusOr<std::vector<engine::Tensor>> result) {
    a->result = std::move(result);
    ++a->calls;
    a->done.Notify();
  };
  return request;
}

float FinalH(const RequestSpec& spec, int64_t row) {
  const int64_t len = spec.lengths.empty() ? spec.steps : spec.lengths[row];
  float sum = 0;
  for (int64_t t = 0; t < len; ++t) sum += Value(spec.id, row, t);
  return (spec.initial_h.empty() ? 0.0f : spec.initial_h[row]) + sum;
}

::testing::AssertionResult IsOwnAnswer(const Answer& answer, const RequestSpec& spec) {
  if (!answer.done.HasBeenNotified()) return ::testing::AssertionFailure() << "not answered";
  if (answer.calls != 1) return ::testing::AssertionFailure() << "done ran " << answer.calls;
  if (!answer.result.ok()) return ::testing::AssertionFailure() << answer.result.status();
  const std::vector<engine::Tensor>& out = *answer.result;
  if (out.size() != 2) return ::testing::AssertionFailure() << out.size() << " outputs";
  const engine::Tensor& echo = out[0];
  const engine::Tensor& summary = out[1];
  if (echo.shape() != engine::Shape{spec.rows, spec.steps, 1}) {
    return ::testing::AssertionFailure()
           << "request " << spec.id << ": echo shape " << engine::ShapeString(echo.shape());
  }
  if (summary.shape() != engine::Shape{spec.rows, 2}) {
    return ::testing::AssertionFailure()
           << "request " << spec.id << ": summary shape " << engine::ShapeString(summary.shape());
  }
  for (int64_t b = 0; b < spec.rows; ++b) {
    const int64_t len = spec.lengths.empty() ? spec.steps : spec.lengths[b];
    float sum = 0;
    for (int64_t t = 0; t < spec.steps; ++t) {
      const float want = t < len ? Value(spec.id, b, t) : 0.0f;
      if (t < len) sum += want;
      if (echo.f32()[b * spec.steps + t] != want) {
        return ::testing::AssertionFailure()
               << "request " << spec.id << " row " << b << " step " << t << ": echo "
               << echo.f32()[b * spec.steps + t] << ", want " << want;
      }
    }
    if (summary.f32()[b * 2] != static_cast<float>(len) || summary.f32()[b * 2 + 1] != sum) {
      return ::testing::AssertionFailure()
             << "request " << spec.id << " row " << b << ": summary {" << summary.f32()[b * 2]
             << ", " << summary.f32()[b * 2 + 1] << "}, want {" << len << ", " << sum << "}";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rnnserve::testing
