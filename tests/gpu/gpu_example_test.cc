// The example model (Masking -> LSTM -> LSTM -> Dense) on the GPU engine against Keras's own
// predictions (models/scripts/make_example.py), the same fixtures the CPU engine passes.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"
#include "tests/support/zero_length.h"

namespace rnnserve::testing {
namespace {

class GpuExampleModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RNNSERVE_SKIP_WITHOUT_GPU();
    auto model = models::LoadModelFile(SourcePath("models/examples/waveform_lstm/1/model.h5"));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    auto compiled = CompileOn(engine::EngineKind::kCuda, model_);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    compiled_ = std::move(*compiled);
  }
  engine::Model model_;
  std::unique_ptr<engine::CompiledModel> compiled_;
};

TEST_F(GpuExampleModelTest, MaskedMixedLengthsMatchKeras) {
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  std::vector<engine::Tensor> out;
  const absl::Status s = compiled_->Run(batch, &out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(GpuExampleModelTest, ExplicitLengthsMatchKeras) {
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  const auto lengths = LoadNpy("tests/fixtures/example/lengths.npy");
  batch.lengths.assign(lengths.values.begin(), lengths.values.end());
  std::vector<engine::Tensor> out;
  ASSERT_TRUE(compiled_->Run(batch, &out).ok());
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(GpuExampleModelTest, ZeroLengthSequenceActsAsAFullyMaskedOne) {
  EXPECT_TRUE(ZeroLengthRowActsAsAFullyMaskedOne(compiled_.get()));
}

TEST_F(GpuExampleModelTest, EachSequenceAloneEqualsItsRowInTheBatch) {
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
    EXPECT_TRUE(AllClose(out[0], want)) << "sequence " << b;
  }
}

// A stateful sequence on the GPU: the first 10 steps, then the rest starting from the states
// the first chunk ended in, give Keras's prediction for the whole sequence.
TEST_F(GpuExampleModelTest, ChunksCarryingFinalStatesEqualTheWholeSequence) {
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
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(GpuExampleModelTest, PlacementsPutRecurrentAndDenseLayersOnTheGpu) {
  const auto placements = compiled_->placements();
  ASSERT_EQ(placements.size(), model_.layers.size());
  for (size_t i = 0; i < placements.size(); ++i) {
    std::cout << "[ place ] " << placements[i].layer << ": " << placements[i].engine << " ("
              << placements[i].reason << ")\n";
    EXPECT_FALSE(placements[i].reason.empty());
    if (std::holds_alternative<engine::RecurrentSpec>(model_.layers[i].spec) ||
        std::holds_alternative<engine::DenseSpec>(model_.layers[i].spec)) {
      EXPECT_EQ(placements[i].engine, "cuda") << placements[i].layer;
    }
  }
  EXPECT_GT(compiled_->memory_bytes(), 0);
}

}  // namespace
}  // namespace rnnserve::testing
