// Which model outputs Evaluate's cross-entropy losses read from logits (as Keras's TF backend
// does), and the model copy that returns those logits. Keras's own values for the losses are
// checked in tests/integration/evaluate_integration_test.cc.

#include "server/evaluate/keras_logits.h"

#include <cmath>

#include "engine/engine.h"
#include "gtest/gtest.h"

namespace rnnserve::server::evaluate {
namespace {

using engine::ActivationKind;

// x [B, F] -> Dense(3, act) -> [tail layer] -> output; values 0 (x), 1 (dense), 2 (tail).
engine::Model Head(const std::string& format, const std::string& producer, ActivationKind act,
                   const std::string& dense_class = "Dense", bool dropout_after = false) {
  engine::Model m;
  m.source_format = format;
  m.producer = producer;
  m.inputs = {{"x", engine::DType::kFloat32, {-1, 2}}};
  engine::DenseSpec dense{.in = 2, .out = 3, .kernel = {3, -1, 20, 0.5, -4, 9}, .bias = {1, 0, -2}};
  dense.activation = engine::Activation::Of(act);
  m.layers.push_back({"z", dense_class, dense, {0}, {1}});
  int out = 1;
  if (dropout_after) {
    m.layers.push_back({"drop", "Dropout", engine::IdentitySpec{}, {1}, {2}});
    out = 2;
  }
  m.num_values = out + 1;
  m.outputs = {{"y", engine::DType::kFloat32, {-1, 3}}};
  m.output_values = {out};
  return m;
}

TEST(KerasLogitsTest, ADenseSoftmaxOrSigmoidOutputIsReadFromItsLogits) {
  for (ActivationKind act : {ActivationKind::kSoftmax, ActivationKind::kSigmoid}) {
    const auto found = FindOutputLogits(Head("keras_h5", "keras 2.15.0", act), 0);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->layer, 0);
    EXPECT_TRUE(found->split);
  }
  EXPECT_FALSE(FindOutputLogits(Head("keras_h5", "keras 2.15.0", ActivationKind::kTanh), 0));
}

TEST(KerasLogitsTest, ASavedModelFromTfKerasIsAKeras2Model) {
  const auto found =
      FindOutputLogits(Head("tf_savedmodel", "keras 2.21.0", ActivationKind::kSoftmax), 0);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->layer, 0);
  EXPECT_FALSE(FindOutputLogits(
      Head("tf_savedmodel", "keras 2.21.0", ActivationKind::kSoftmax, "Dense", true), 0));
}

TEST(KerasLogitsTest, TimeDistributedOnnxAndKeras2DropoutTakeTheProbabilities) {
  EXPECT_FALSE(FindOutputLogits(
      Head("keras_h5", "keras 2.15.0", ActivationKind::kSoftmax, "TimeDistributed"), 0));
  EXPECT_FALSE(FindOutputLogits(Head("onnx", "pytorch 2.5", ActivationKind::kSoftmax), 0));
  EXPECT_FALSE(FindOutputLogits(
      Head("keras_h5", "keras 2.15.0", ActivationKind::kSoftmax, "Dense", true), 0));
  // Keras 3's Dropout returns its input itself at inference.
  const auto keras3 =
      FindOutputLogits(Head("keras", "keras 3.6.0", ActivationKind::kSoftmax, "Dense", true), 0);
  ASSERT_TRUE(keras3.has_value());
  EXPECT_EQ(keras3->layer, 0);
}

TEST(KerasLogitsTest, WithLogitsOutputSplitsTheActivationOffAndReturnsBoth) {
  const engine::Model model = Head("keras", "keras 3.6.0", ActivationKind::kSoftmax, "Dense", true);
  const engine::Model copy = WithLogitsOutput(model, 0, *FindOutputLogits(model, 0));
  ASSERT_TRUE(copy.Validate().ok()) << copy.Validate();
  ASSERT_EQ(copy.outputs.size(), 2u);
  EXPECT_EQ(copy.outputs[1].name, "y:logits");
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  auto original = (*engine)->Compile(model, {});
  auto with_logits = (*engine)->Compile(copy, {});
  ASSERT_TRUE(original.ok() && with_logits.ok());
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({2, 2}, {0.5f, -1.0f, 2.0f, 3.0f}));
  std::vector<engine::Tensor> a, b;
  ASSERT_TRUE((*original)->Run(batch, &a).ok());
  ASSERT_TRUE((*with_logits)->Run(batch, &b).ok());
  ASSERT_EQ(b.size(), 2u);
  // The model's own output is unchanged; the logits are x . kernel + bias.
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(b[0].f32()[i], a[0].f32()[i]);
  const float x[2][2] = {{0.5f, -1.0f}, {2.0f, 3.0f}};
  const float kernel[2][3] = {{3, -1, 20}, {0.5, -4, 9}};
  const float bias[3] = {1, 0, -2};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(b[1].f32()[r * 3 + c], x[r][0] * kernel[0][c] + x[r][1] * kernel[1][c] + bias[c],
                  1e-5);
    }
  }
}

}  // namespace
}  // namespace rnnserve::server::evaluate
