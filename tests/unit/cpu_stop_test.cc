// Batch::stop on the CPU engine (engine/engine.h, engine/cpu/stop_check.h): a run whose stop
// answers true stops at the next step boundary with CANCELLED, fewer than all of its steps
// computed (RunCounters::recurrent_steps_in_last_run), on both ways of sharing a layer between
// threads; a stop that never answers true changes nothing, and the instance runs the next batch
// as PyTorch does (fixture TorchLstm, models/scripts/make_cpu_fixtures.py).

#include <atomic>
#include <memory>
#include <vector>

#include "engine/cpu/recurrent.h"
#include "engine/cpu/stop_check.h"
#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/cpu_test_util.h"

namespace rnnserve {
namespace {

using cpu_test::Case;
using cpu_test::Direction;
using cpu_test::LoadCase;
using engine::Tensor;
using engine::cpu::RecurrentKernel;
using engine::cpu::RecurrentSplit;
using engine::cpu::StopCheck;
using testing::AllClose;
using testing::ToFloatTensor;

constexpr int64_t kLongSteps = 4096;

engine::RecurrentSpec TorchLstmSpec(const Case& c) {
  engine::RecurrentSpec spec;
  spec.cell = engine::CellType::kLstm;
  spec.input_size = static_cast<int>(c.at("W0").shape[1]);
  spec.hidden_size = static_cast<int>(c.at("W0").shape[0]) / 4;
  spec.return_sequences = true;
  spec.masking = engine::MaskSemantics::kOnnx;
  spec.directions.push_back(Direction(c, 0));
  return spec;
}

// input -> LSTM -> LSTM (PyTorch's weights twice, ONNX semantics), returning the sequence.
engine::Model TwoLstms(const Case& c) {
  engine::RecurrentSpec first = TorchLstmSpec(c);
  engine::RecurrentSpec second = first;
  second.input_size = first.hidden_size;
  second.directions[0].W.assign(first.directions[0].R.begin(), first.directions[0].R.end());
  engine::Model m;
  m.name = "two_lstms";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, first.input_size}});
  m.layers.push_back({"lstm", "LSTM", first, {0}, {1}});
  m.layers.push_back({"lstm_2", "LSTM", second, {1}, {2}});
  m.outputs.push_back({"y", engine::DType::kFloat32, {}});
  m.output_values = {2};
  m.num_values = 3;
  return m;
}

// input -> LSTM, PyTorch's run of the fixture.
engine::Model OneLstm(const Case& c) {
  engine::Model m = TwoLstms(c);
  m.layers.pop_back();
  m.output_values = {1};
  m.num_values = 2;
  return m;
}

// [B, T, I] of values in [-1, 1) (a fixed pseudo-random pattern: only the step count matters).
Tensor LongInput(int64_t B, int64_t T, int64_t I) {
  Tensor x = Tensor::Float({B, T, I});
  uint32_t v = 12345;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    v = v * 1664525u + 1013904223u;
    x.f32()[i] = static_cast<float>(v >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return x;
}

std::unique_ptr<engine::CompiledModel> Compile(const engine::Model& m, int threads) {
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(m, {.num_threads = threads});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

TEST(CpuStop, StopAnsweredTrueEndsTheRunCancelledBeforeItsLastStep) {
  const Case c = LoadCase("TorchLstm");
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    auto compiled = Compile(TwoLstms(c), threads);
    ASSERT_NE(compiled, nullptr);
    engine::Batch batch;
    batch.inputs.push_back(LongInput(1, kLongSteps, c.at("W0").shape[1]));
    // Wanted at the start and at the first question inside the layer; not at the second.
    std::atomic<int> asked{0};
    batch.stop = [&asked] { return ++asked > 2; };
    std::vector<Tensor> out;
    const absl::Status s = compiled->Run(batch, &out);
    EXPECT_TRUE(absl::IsCancelled(s)) << s;
    EXPECT_EQ(asked.load(), 3);
    const int64_t ran = compiled->counters().recurrent_steps_in_last_run;
    EXPECT_GT(ran, 0);
    EXPECT_LE(ran, 2 * engine::kStopCheckSteps);

    // Never stopped: every step of both layers, as without a stop.
    batch.stop = [] { return false; };
    ASSERT_TRUE(compiled->Run(batch, &out).ok());
    EXPECT_EQ(compiled->counters().recurrent_steps_in_last_run, 2 * kLongSteps);
  }
}

TEST(CpuStop, StopBeforeTheFirstLayerRunsNoStep) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TwoLstms(c), 1);
  ASSERT_NE(compiled, nullptr);
  engine::Batch batch;
  batch.inputs.push_back(LongInput(2, kLongSteps, c.at("W0").shape[1]));
  batch.stop = [] { return true; };
  std::vector<Tensor> out;
  EXPECT_TRUE(absl::IsCancelled(compiled->Run(batch, &out)));
  EXPECT_EQ(compiled->counters().recurrent_steps_in_last_run, 0);
}

TEST(CpuStop, RunAfterAStoppedRunAndUnderAStopThatNeverSaysStopMatchesPyTorch) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(OneLstm(c), 2);
  ASSERT_NE(compiled, nullptr);
  engine::Batch long_batch;
  long_batch.inputs.push_back(LongInput(4, kLongSteps, c.at("W0").shape[1]));
  std::atomic<int> asked{0};
  long_batch.stop = [&asked] { return ++asked > 3; };
  std::vector<Tensor> out;
  ASSERT_TRUE(absl::IsCancelled(compiled->Run(long_batch, &out)));

  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(c.at("x")));
  batch.lengths = cpu_test::Lengths(c);
  batch.initial_states["lstm"] = {ToFloatTensor(cpu_test::Slice(c.at("h0"), 0)),
                                  ToFloatTensor(cpu_test::Slice(c.at("c0"), 0))};
  batch.stop = [] { return false; };
  ASSERT_TRUE(compiled->Run(batch, &out).ok());
  EXPECT_TRUE(AllClose(out[0], c.at("y")));
}

class RecurrentKernelStop : public ::testing::TestWithParam<RecurrentSplit> {};

TEST_P(RecurrentKernelStop, EachSplitStopsAtTheStepBoundaryAfterStopSaysSo) {
  const Case c = LoadCase("TorchLstm");
  auto kernel =
      RecurrentKernel::Create(TorchLstmSpec(c), "lstm", {.num_threads = 2, .split = GetParam()});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int64_t B = 4;
  const Tensor x = LongInput(B, kLongSteps, c.at("W0").shape[1]);
  const std::vector<int32_t> lengths(B, static_cast<int32_t>(kLongSteps));
  std::atomic<int> asked{0};
  const std::function<bool()> stop_after_one = [&asked] { return ++asked > 1; };
  StopCheck stop(&stop_after_one);
  std::vector<Tensor> outputs;
  const absl::Status s = (*kernel)->Run(x, lengths, {}, {}, &outputs, nullptr, false, &stop);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_GT(stop.total_steps(), 0);
  EXPECT_LT(stop.total_steps(), kLongSteps);

  StopCheck never(nullptr);
  ASSERT_TRUE((*kernel)->Run(x, lengths, {}, {}, &outputs, nullptr, false, &never).ok());
  EXPECT_EQ(never.total_steps(), kLongSteps);
}

INSTANTIATE_TEST_SUITE_P(Splits, RecurrentKernelStop,
                         ::testing::Values(RecurrentSplit::kUnits, RecurrentSplit::kRows),
                         [](const auto& info) {
                           return info.param == RecurrentSplit::kUnits ? std::string("Units")
                                                                       : std::string("Rows");
                         });

}  // namespace
}  // namespace rnnserve
