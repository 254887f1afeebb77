// The example model (Masking -> LSTM -> LSTM -> Dense) on the GPU engine against Keras's own
// predictions (models/scripts/make_example.py), the same fixtures the CPU engine passes.

#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

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
