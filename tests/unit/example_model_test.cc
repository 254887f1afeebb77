// The example model (Masking -> LSTM -> LSTM -> Dense) against Keras's own predictions
// (models/scripts/make_example.py) on each engine: one test body, instantiated for the CPU
// engine (label unit) and the GPU engine (label gpu; it skips with its reason where there is no
// GPU). Includes a batch of sequences of different lengths and a stateful run in two chunks.

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"
#include "tests/support/zero_length.h"

namespace rnnserve::engine {
// Names the parameter in test listings (ctest -N) instead of its bytes.
void PrintTo(EngineKind kind, std::ostream* os) {
  *os << (kind == EngineKind::kCuda ? "cuda" : "cpu");
}
}  // namespace rnnserve::engine

namespace rnnserve::testing {
namespace {

using engine::EngineKind;

class ExampleModelTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    if (GetParam() == EngineKind::kCuda) RNNSERVE_SKIP_WITHOUT_GPU();
    auto model = models::LoadModelFile(SourcePath("models/examples/waveform_lstm/1/model.h5"));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    auto compiled = CompileOn(GetParam(), model_);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    compiled_ = std::move(*compiled);
  }
  engine::Model model_;
  std::unique_ptr<engine::CompiledModel> compiled_;
};

TEST_P(ExampleModelTest, ImportsStackedLstmDenseInCanonicalLayout) {
  ASSERT_EQ(model_.layers.size(), 4u);
  const auto& lstm = std::get<engine::RecurrentSpec>(model_.layers[1].spec);
  EXPECT_EQ(lstm.input_size, 2);
  EXPECT_EQ(lstm.hidden_size, 32);
  EXPECT_TRUE(lstm.return_sequences);
  EXPECT_EQ(lstm.directions[0].W.size(), 4u * 32 * 2);  // [4H, I]
  EXPECT_EQ(model_.inputs[0].shape, (engine::Shape{-1, -1, 2}));
}

TEST_P(ExampleModelTest, MaskedMixedLengthsMatchKeras) {
  // The Masking layer derives each sequence's length from its zero padding.
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  std::vector<engine::Tensor> out;
  const absl::Status s = compiled_->Run(batch, &out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy"), kFp32Exact));
}

TEST_P(ExampleModelTest, ExplicitLengthsMatchKeras) {
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  const auto lengths = LoadNpy("tests/fixtures/example/lengths.npy");
  batch.lengths.assign(lengths.values.begin(), lengths.values.end());
  std::vector<engine::Tensor> out;
  const absl::Status s = compiled_->Run(batch, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy"), kFp32Exact));
}

TEST_P(ExampleModelTest, ZeroLengthSequenceActsAsAFullyMaskedOne) {
  EXPECT_TRUE(ZeroLengthRowActsAsAFullyMaskedOne(compiled_.get()));
}

TEST_P(ExampleModelTest, EachSequenceAloneEqualsItsRowInTheBatch) {
  const auto input = LoadNpy("tests/fixtures/example/input.npy");
  const auto expected = LoadNpy("tests/fixtures/example/expected.npy");
  const int64_t T = input.shape[1], F = input.shape[2], C = expected.shape[1];
  for (int64_t b = 0; b < input.shape[0]; ++b) {
    engine::Batch one;
    std::vector<float> row(input.values.begin() + b * T * F,
                           input.values.begin() + (b + 1) * T * F);
    one.inputs.push_back(engine::Tensor::Float({1, T, F}, row));
    std::vector<engine::Tensor> out;
    const absl::Status s = compiled_->Run(one, &out);
    ASSERT_TRUE(s.ok()) << "sequence " << b << ": " << s;
    client::NpyArray want{"<f8", {1, C}, {}};
    want.values.assign(expected.values.begin() + b * C, expected.values.begin() + (b + 1) * C);
    EXPECT_TRUE(AllClose(out[0], want, kFp32Exact)) << "sequence " << b;
  }
}

// A stateful sequence: the first 10 steps, then the rest starting from the states the first
// chunk ended in, give Keras's prediction for the whole sequence.
TEST_P(ExampleModelTest, ChunksCarryingFinalStatesEqualTheWholeSequence) {
  const auto input = LoadNpy("tests/fixtures/example/input.npy");      // [3, 40, 2]
  const auto lengths = LoadNpy("tests/fixtures/example/lengths.npy");  // each > 10
  const int64_t B = input.shape[0], T = input.shape[1], F = input.shape[2], T1 = 10;
  auto chunk = [&](int64_t from, int64_t steps) {
    engine::Batch batch;
    std::vector<float> x;
    for (int64_t b = 0; b < B; ++b) {
      const auto row = input.values.begin() + (b * T + from) * F;
      x.insert(x.end(), row, row + steps * F);
      const int64_t len = static_cast<int64_t>(lengths.values[b]);
      batch.lengths.push_back(static_cast<int32_t>(std::min(steps, len - from)));
    }
    batch.inputs.push_back(engine::Tensor::Float({B, steps, F}, x));
    return batch;
  };
  std::map<std::string, std::vector<engine::Tensor>> states;
  engine::Batch first = chunk(0, T1);
  first.final_states = &states;
  std::vector<engine::Tensor> out;
  const absl::Status s1 = compiled_->Run(first, &out);
  ASSERT_TRUE(s1.ok()) << s1;
  ASSERT_EQ(states.size(), 2u);  // both LSTM layers
  engine::Batch second = chunk(T1, T - T1);
  second.initial_states = states;
  const absl::Status s2 = compiled_->Run(second, &out);
  ASSERT_TRUE(s2.ok()) << s2;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy"), kFp32Exact));
}

TEST_P(ExampleModelTest, PlacementsPutRecurrentAndDenseLayersOnTheEngine) {
  const std::string engine_name = GetParam() == EngineKind::kCuda ? "cuda" : "cpu";
  const auto placements = compiled_->placements();
  ASSERT_EQ(placements.size(), model_.layers.size());
  for (size_t i = 0; i < placements.size(); ++i) {
    std::cout << "[ place ] " << placements[i].layer << ": " << placements[i].engine << " ("
              << placements[i].reason << ")\n";
    EXPECT_FALSE(placements[i].reason.empty());
    if (std::holds_alternative<engine::RecurrentSpec>(model_.layers[i].spec) ||
        std::holds_alternative<engine::DenseSpec>(model_.layers[i].spec)) {
      EXPECT_EQ(placements[i].engine, engine_name) << placements[i].layer;
    }
  }
  EXPECT_GT(compiled_->memory_bytes(), 0);
}

// Instances are named Cpu and Gpu: tests/CMakeLists.txt labels */Gpu gpu and the rest unit.
INSTANTIATE_TEST_SUITE_P(Engines, ExampleModelTest,
                         ::testing::Values(EngineKind::kCpu, EngineKind::kCuda),
                         [](const auto& info) {
                           return std::string(info.param == EngineKind::kCuda ? "Gpu" : "Cpu");
                         });

}  // namespace
}  // namespace rnnserve::testing
