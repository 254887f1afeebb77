// CellularScheduler with resident_step_loop (cellular_resident.cc) against a deterministic step
// loop: sequences join the instance's loop, leave with their rows when it says done, and the
// answer is what the chunked path gives; engines without a loop keep chunks and say why.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/batching/cellular_scheduler.h"
#include "tests/unit/batching_fake_engine.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve::server::batching {
namespace {

using testing::Answer;
using testing::RequestSpec;
using testing::Value;

// The fake engine's model (batching_fake_engine.h) as a step loop: a sequence is done as soon as
// it joins; echo [length, 1], summary [1, 2], the state "rnn" [1, 1] = its sum.
class FakeStepLoop final : public engine::StepLoop {
 public:
  explicit FakeStepLoop(int capacity) : rows_(capacity), joined_(capacity, 0) {}
  int capacity() const override { return static_cast<int>(rows_.size()); }
  int max_steps() const override { return 64; }
  std::vector<engine::Shape> output_rows() const override { return {{1}, {2}}; }
  absl::Status Join(int slot, const engine::Tensor& input, int64_t row, int length) override {
    if (joined_[slot] != 0) return absl::FailedPreconditionError("slot busy");
    const int64_t T = input.dim(1), F = input.dim(2);
    rows_[slot].clear();
    for (int t = 0; t < length; ++t) rows_[slot].push_back(input.f32()[(row * T + t) * F]);
    joined_[slot] = 1;
    ++joins;
    return absl::OkStatus();
  }
  bool Started(int slot) const override { return joined_[slot] != 0; }
  bool Done(int slot) const override { return joined_[slot] != 0; }
  absl::Status Outputs(int slot, std::vector<engine::Tensor>* outputs,
                       engine::StateMap* final_states) const override {
    const std::vector<float>& x = rows_[slot];
    const int64_t n = static_cast<int64_t>(x.size());
    engine::Tensor echo = engine::Tensor::Float({n, 1});
    float sum = 0.0f;
    for (int64_t t = 0; t < n; ++t) sum += (echo.f32()[t] = x[t]);
    engine::Tensor summary = engine::Tensor::Float({1, 2});
    summary.f32()[0] = static_cast<float>(n);
    summary.f32()[1] = sum;
    *outputs = {std::move(echo), std::move(summary)};
    if (final_states != nullptr) {
      engine::Tensor h = engine::Tensor::Float({1, 1});
      h.f32()[0] = sum;
      (*final_states)["rnn"] = {std::move(h)};
    }
    joined_[slot] = 0;  // the slot may take the next sequence
    return absl::OkStatus();
  }
  std::atomic<int> joins{0};

 private:
  std::vector<std::vector<float>> rows_;
  mutable std::vector<int> joined_;
};

class LoopEngine final : public engine::CompiledModel, public engine::StepLoopSource {
 public:
  explicit LoopEngine(std::string unsupported = "") : unsupported_(std::move(unsupported)) {}
  absl::Status Run(const engine::Batch&, std::vector<engine::Tensor>*) override {
    ++runs;
    return absl::InternalError("chunks must not run on the resident loop");
  }
  std::string engine_name() const override { return "loop"; }
  std::vector<engine::LayerPlacement> placements() const override { return {}; }
  int64_t memory_bytes() const override { return 0; }
  std::string StepLoopUnsupported() const override { return unsupported_; }
  absl::StatusOr<std::unique_ptr<engine::StepLoop>> NewStepLoop(int capacity, int) override {
    auto loop = std::make_unique<FakeStepLoop>(capacity);
    this->loop = loop.get();
    return loop;
  }
  std::atomic<int> runs{0};
  FakeStepLoop* loop = nullptr;

 private:
  const std::string unsupported_;
};

CellularSchedulerOptions Options(int slots) {
  CellularSchedulerOptions o;
  o.model_name = "fake";
  o.max_active_sequences = slots;
  o.chunk_steps = 4;
  o.shape.input_time_axis = {true};
  o.shape.output_time_axis = {true, false};  // echo [B, T, 1], summary [B, 2]
  o.shape.state_rows["rnn"] = {{1}};
  o.resident_step_loop = true;
  o.resident_max_steps = 64;
  return o;
}

std::shared_ptr<Answer> Submit(CellularScheduler& s, const RequestSpec& spec) {
  std::shared_ptr<Answer> answer;
  auto request = testing::MakeRequest(spec, &answer);
  EXPECT_TRUE(s.Schedule(&request).ok());
  return answer;
}

TEST(CellularResidentTest, SequencesRunInTheLoopAndAnswerAsIfRunWhole) {
  LoopEngine engine;
  auto s = CellularScheduler::Create(Options(2), {&engine});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->resident()) << (*s)->resident_note();
  std::map<std::string, std::vector<engine::Tensor>> states;
  const RequestSpec spec{
      .id = 100, .rows = 5, .steps = 9, .lengths = {5, 0, 9, 1, 3}, .final_states = &states};
  auto answer = Submit(**s, spec);
  answer->done.WaitForNotification();
  ASSERT_TRUE(answer->result.ok()) << answer->result.status();
  const engine::Tensor& echo = (*answer->result)[0];
  const engine::Tensor& summary = (*answer->result)[1];
  ASSERT_EQ(echo.shape(), (engine::Shape{5, 9, 1}));
  ASSERT_EQ(summary.shape(), (engine::Shape{5, 2}));
  for (int64_t b = 0; b < 5; ++b) {
    const int64_t L = spec.lengths[b];
    float sum = 0.0f;
    for (int64_t t = 0; t < 9; ++t) {
      const float want = L == 0 ? 0.0f : Value(spec.id, b, std::min(t, L - 1));
      EXPECT_FLOAT_EQ(echo.f32()[b * 9 + t], want) << "row " << b << " step " << t;
      if (t < L) sum += Value(spec.id, b, t);
    }
    EXPECT_FLOAT_EQ(summary.f32()[b * 2], static_cast<float>(L)) << "row " << b;
    EXPECT_FLOAT_EQ(summary.f32()[b * 2 + 1], sum) << "row " << b;
    EXPECT_FLOAT_EQ(states["rnn"][0].f32()[b], sum) << "row " << b;
  }
  // Two slots for five sequences: the empty one is answered without the loop.
  EXPECT_EQ(engine.loop->joins.load(), 4);
  EXPECT_EQ(engine.runs.load(), 0);
  EXPECT_EQ(answer->calls, 1);
}

TEST(CellularResidentTest, InitialStatesAndLongSequencesAreInvalidArguments) {
  LoopEngine engine;
  auto s = CellularScheduler::Create(Options(2), {&engine});
  ASSERT_TRUE(s.ok()) << s.status();
  std::shared_ptr<Answer> answer;
  auto stateful = testing::MakeRequest({.id = 1, .initial_h = {0.5f}}, &answer);
  EXPECT_EQ((*s)->Schedule(&stateful).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stateful, nullptr);  // stays with the caller
  auto longer = testing::MakeRequest({.id = 2, .steps = 65}, &answer);
  const absl::Status st = (*s)->Schedule(&longer);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at most 64"), std::string::npos) << st;
}

TEST(CellularResidentTest, ModelsTheLoopDoesNotRunKeepChunksAndSayWhy) {
  LoopEngine unsupported("layer lstm has peepholes");
  auto s = CellularScheduler::Create(Options(2), {&unsupported});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->resident());
  EXPECT_EQ((*s)->resident_note(), "layer lstm has peepholes");

  testing::FakeEngine plain;
  auto chunks = CellularScheduler::Create(Options(2), {&plain});
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  EXPECT_FALSE((*chunks)->resident());
  EXPECT_EQ((*chunks)->resident_note(), "the engine has no resident step loop");
  auto answer = Submit(**chunks, {.id = 7, .steps = 6});
  answer->done.WaitForNotification();
  EXPECT_TRUE(answer->result.ok()) << answer->result.status();
  EXPECT_GT(plain.calls(), 0);
}

TEST(CellularResidentTest, ResidentMaxStepsMustBePositive) {
  LoopEngine engine;
  CellularSchedulerOptions o = Options(2);
  o.resident_max_steps = 0;
  EXPECT_EQ(CellularScheduler::Create(o, {&engine}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rnnserve::server::batching
