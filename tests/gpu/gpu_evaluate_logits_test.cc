// Evaluate's cross-entropy on the GPU engine: the copy of the model that returns the logits of
// its final softmax or sigmoid (Servable::RunWithLogits) compiles and runs on a GPU instance,
// and the loss it gives equals Keras's model.evaluate on the saturated fixtures
// (models/scripts/make_evaluate_fixtures.py). tests/integration/evaluate_integration_test.cc
// checks the same through the server; this one pins the GPU instance.

#include <google/protobuf/text_format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/training_config.h"
#include "server/evaluate/accumulator.h"
#include "server/evaluate/keras_logits.h"
#include "server/servable.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

class GpuEvaluateLogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuEvaluateLogitsTest, LossFromTheGpuInstanceMatchesKeras) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const std::string dir = "tests/fixtures/evaluate/" + GetParam() + "/";
  v1::ModelConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(instance_group { kind: KIND_GPU count: 1 })pb", &config));
  config.set_name(GetParam());
  auto servable = server::Servable::Load(SourcePath(dir), 1, config);
  ASSERT_TRUE(servable.ok()) << servable.status();
  const server::Servable& model = **servable;
  ASSERT_EQ(model.instances()[0].kind, "KIND_GPU");
  ASSERT_TRUE(model.training_config().has_value());

  std::ifstream in(SourcePath(dir + "expected.json"));
  const nlohmann::json expected = nlohmann::json::parse(in);
  auto loss = server::evaluate::MakeLoss(models::CanonicalLossName(model.training_config()->loss),
                                         model.training_config()->from_logits,
                                         model.training_config()->huber_delta);
  ASSERT_TRUE(loss.ok()) << loss.status();
  loss->keras_major = std::max(2, server::evaluate::KerasMajor(model.ir()));

  const client::NpyArray x = LoadNpy(dir + "x.npy");
  const client::NpyArray y = LoadNpy(dir + "y.npy");
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(x));
  const bool with_logits = model.HasOutputLogits(0);
  std::vector<engine::Tensor> out;
  const absl::Status ran =
      with_logits ? model.RunWithLogits(0, batch, &out) : model.Run(batch, &out);
  ASSERT_TRUE(ran.ok()) << ran;
  ASSERT_EQ(out.size(), with_logits ? 2u : 1u);

  std::vector<float> weights;
  if (std::ifstream(SourcePath(dir + "w.npy")).good()) {
    for (double w : LoadNpy(dir + "w.npy").values) weights.push_back(static_cast<float>(w));
  }
  server::evaluate::Accumulator acc(*loss, {});
  const std::vector<float> targets(y.values.begin(), y.values.end());
  ASSERT_TRUE(
      acc.Add(out[0], with_logits ? &out[1] : nullptr, y.shape, targets, weights, "y").ok());
  const double want = expected["loss"].get<double>();
  EXPECT_NEAR(acc.loss(), want, 1e-4 * std::fabs(want))
      << (with_logits ? "logits" : "probabilities");
}

INSTANTIATE_TEST_SUITE_P(
    Saturated, GpuEvaluateLogitsTest,
    ::testing::Values("saturated_softmax_categorical", "saturated_softmax_layer_sparse_weighted",
                      "saturated_sigmoid_binary", "saturated_sigmoid_layer_binary_weighted",
                      "saturated_softmax_sequence_sparse", "saturated_dropout_softmax_sparse",
                      "keras3_saturated_bilstm_batchnorm_categorical",
                      "keras3_saturated_softmax_sparse_weighted", "keras3_saturated_sigmoid_binary",
                      "keras3_saturated_dropout_sigmoid_binary_weighted"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace rnnserve::testing
