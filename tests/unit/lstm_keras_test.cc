// The stacked LSTM + Dense path against Keras's own predictions for the example model
// (models/scripts/make_example.py), including a batch of sequences of different lengths.

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"
#include "tests/support/zero_length.h"

namespace rnnserve {
namespace {

using testing::AllClose;
using testing::LoadNpy;
using testing::SourcePath;
using testing::ToFloatTensor;

class ExampleModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = models::LoadModelFile(SourcePath("models/examples/waveform_lstm/1/model.h5"));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    auto engine = engine::Engine::Create({});
    ASSERT_TRUE(engine.ok());
    auto compiled = (*engine)->Compile(model_, {});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    compiled_ = std::move(*compiled);
  }
  engine::Model model_;
  std::unique_ptr<engine::CompiledModel> compiled_;
};

TEST_F(ExampleModelTest, ImportsStackedLstmDenseInCanonicalLayout) {
  ASSERT_EQ(model_.layers.size(), 4u);
  const auto& lstm = std::get<engine::RecurrentSpec>(model_.layers[1].spec);
  EXPECT_EQ(lstm.input_size, 2);
  EXPECT_EQ(lstm.hidden_size, 32);
  EXPECT_TRUE(lstm.return_sequences);
  EXPECT_EQ(lstm.directions[0].W.size(), 4u * 32 * 2);  // [4H, I]
  EXPECT_EQ(model_.inputs[0].shape, (engine::Shape{-1, -1, 2}));
}

TEST_F(ExampleModelTest, MaskedMixedLengthsMatchKeras) {
  // The Masking layer derives each sequence's length from its zero padding.
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  std::vector<engine::Tensor> out;
  ASSERT_TRUE(compiled_->Run(batch, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(ExampleModelTest, ExplicitLengthsMatchKeras) {
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(LoadNpy("tests/fixtures/example/input.npy")));
  const auto lengths = LoadNpy("tests/fixtures/example/lengths.npy");
  batch.lengths.assign(lengths.values.begin(), lengths.values.end());
  std::vector<engine::Tensor> out;
  ASSERT_TRUE(compiled_->Run(batch, &out).ok());
  EXPECT_TRUE(AllClose(out[0], LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(ExampleModelTest, ZeroLengthSequenceActsAsAFullyMaskedOne) {
  EXPECT_TRUE(testing::ZeroLengthRowActsAsAFullyMaskedOne(compiled_.get()));
}

TEST_F(ExampleModelTest, EachSequenceAloneEqualsItsRowInTheBatch) {
  const auto input = LoadNpy("tests/fixtures/example/input.npy");
  const auto expected = LoadNpy("tests/fixtures/example/expected.npy");
  const int64_t T = input.shape[1], F = input.shape[2], C = expected.shape[1];
  for (int64_t b = 0; b < input.shape[0]; ++b) {
    engine::Batch one;
    std::vector<float> row(input.values.begin() + b * T * F,
                           input.values.begin() + (b + 1) * T * F);
    one.inputs.push_back(engine::Tensor::Float({1, T, F}, row));
    std::vector<engine::Tensor> out;
    ASSERT_TRUE(compiled_->Run(one, &out).ok());
    client::NpyArray want{"<f8", {1, C}, {}};
    want.values.assign(expected.values.begin() + b * C, expected.values.begin() + (b + 1) * C);
    EXPECT_TRUE(AllClose(out[0], want)) << "sequence " << b;
  }
}

}  // namespace
}  // namespace rnnserve
