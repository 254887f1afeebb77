// Evaluate and EvaluateStream against the real server, compared with what Keras's own
// model.evaluate returned on the same model and data (models/scripts/make_evaluate_fixtures.py).

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "client/client.h"
#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

// Rows [begin, end) of a fixture array, typed as the array is (class ids stay integers).
v1::Tensor ToProto(const client::NpyArray& a, int64_t begin, int64_t end) {
  auto t = client::ToTensor(a, a.is_integer(), begin, end);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : v1::Tensor();
}

struct Case {
  std::string name;
  client::NpyArray x, y, w;
  bool weighted = false;
  nlohmann::json expected;
};

Case LoadCase(const std::string& name) {
  Case c;
  c.name = name;
  const std::string dir = "tests/fixtures/evaluate/" + name + "/";
  c.x = LoadNpy(dir + "x.npy");
  c.y = LoadNpy(dir + "y.npy");
  c.weighted = std::filesystem::exists(SourcePath(dir + "w.npy"));
  if (c.weighted) c.w = LoadNpy(dir + "w.npy");
  std::ifstream in(SourcePath(dir + "expected.json"));
  c.expected = nlohmann::json::parse(in);
  return c;
}

v1::EvaluateRequest Chunk(const Case& c, int64_t begin, int64_t end) {
  v1::EvaluateRequest req;
  req.mutable_model_spec()->set_name(c.name);
  (*req.mutable_inputs())["x"] = ToProto(c.x, begin, end);
  (*req.mutable_targets())["head"] = ToProto(c.y, begin, end);
  if (c.weighted) *req.mutable_sample_weight() = ToProto(c.w, begin, end);
  return req;
}

void ExpectMatchesKeras(const Case& c, const v1::EvaluateResponse& resp) {
  const double loss = c.expected["loss"].get<double>();
  EXPECT_NEAR(resp.loss(), loss, 1e-5 * std::fabs(loss) + 1e-7) << c.name << " loss";
  EXPECT_EQ(resp.loss_name(), c.expected["loss_name"].get<std::string>());
  for (const auto& [name, value] : c.expected["metrics"].items()) {
    ASSERT_EQ(resp.metrics().count(name), 1u) << c.name << ": no metric " << name;
    const double want = value.get<double>();
    EXPECT_NEAR(resp.metrics().at(name), want, 1e-5 * std::fabs(want) + 1e-7)
        << c.name << " metric " << name;
  }
  EXPECT_EQ(resp.metrics_size(), static_cast<int>(c.expected["metrics"].size())) << c.name;
}

class EvaluateTest : public ServerSuite<::testing::TestWithParam<std::string>> {
 protected:
  static void SetUpTestSuite() { StartServer(SourcePath("tests/fixtures/evaluate")); }
  std::unique_ptr<v1::RnnServe::Stub> Stub() {
    return v1::RnnServe::NewStub(
        grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  }
};

// The test's name ends in the case's, the fixture folder's.
std::string CaseName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

TEST_P(EvaluateTest, EvaluateMatchesKerasModelEvaluate) {
  const Case c = LoadCase(GetParam());
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  const grpc::Status s = Stub()->Evaluate(&ctx, Chunk(c, 0, c.x.shape[0]), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.samples(), c.x.shape[0]);
  ExpectMatchesKeras(c, resp);
}

TEST_P(EvaluateTest, EvaluateStreamOverChunksEqualsWhole) {
  const Case c = LoadCase(GetParam());
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  auto stub = Stub();
  auto writer = stub->EvaluateStream(&ctx, &resp);
  const int64_t B = c.x.shape[0];
  for (int64_t begin = 0; begin < B; begin += 5) {
    ASSERT_TRUE(writer->Write(Chunk(c, begin, std::min(B, begin + 5))));
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.samples(), B);
  ExpectMatchesKeras(c, resp);
}

INSTANTIATE_TEST_SUITE_P(KerasFixtures, EvaluateTest,
                         ::testing::Values("sparse_categorical",
                                           "sparse_categorical_logits_weighted", "categorical_topk",
                                           "binary_weighted", "binary_logits", "mse_regression",
                                           "mae_weighted", "mape", "msle", "huber", "log_cosh",
                                           "sequence_mse_weighted"),
                         CaseName);

// Keras 3 .keras files: the loss and metrics come from config.json's compile_config.
INSTANTIATE_TEST_SUITE_P(Keras3Fixtures, EvaluateTest,
                         ::testing::Values("keras3_mse_strings", "keras3_objects_weighted",
                                           "keras3_sparse_logits", "keras3_binary_weighted"),
                         CaseName);

// Saturated softmax and sigmoid heads: Keras computes cross-entropy from the activation's
// logits where the output comes straight from it, and from the clipped probabilities (in
// float32) where a layer stands between (Keras 2's Dropout, TimeDistributed).
INSTANTIATE_TEST_SUITE_P(
    SaturatedKerasFixtures, EvaluateTest,
    ::testing::Values("saturated_softmax_categorical", "saturated_softmax_layer_sparse_weighted",
                      "saturated_sigmoid_binary", "saturated_sigmoid_layer_binary_weighted",
                      "saturated_softmax_sequence_sparse", "saturated_dropout_softmax_sparse",
                      "saturated_timedistributed_softmax_categorical",
                      "keras3_saturated_bilstm_batchnorm_categorical",
                      "keras3_saturated_softmax_sparse_weighted", "keras3_saturated_sigmoid_binary",
                      "keras3_saturated_dropout_sigmoid_binary_weighted",
                      "keras3_saturated_timedistributed_sigmoid_binary"),
    CaseName);

class EvaluateErrorsTest : public EvaluateTest {};

TEST_F(EvaluateErrorsTest, TargetsOfTheWrongShapeNameTheExpectedShape) {
  const Case c = LoadCase("mse_regression");
  v1::EvaluateRequest req = Chunk(c, 0, 4);
  v1::Tensor& y = (*req.mutable_targets())["head"];
  y.clear_shape();
  y.add_shape(4);
  y.add_shape(1);
  y.mutable_float_val()->Truncate(4);
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  const grpc::Status s = Stub()->Evaluate(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("expected [4,2]"), std::string::npos) << s.error_message();
}

TEST_F(EvaluateErrorsTest, UnknownLossIsInvalidArgument) {
  const Case c = LoadCase("mse_regression");
  v1::EvaluateRequest req = Chunk(c, 0, 4);
  req.set_loss("hinge_squared_cubed");
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  const grpc::Status s = Stub()->Evaluate(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("hinge_squared_cubed"), std::string::npos);
}

TEST_F(EvaluateErrorsTest, ClassIdOutOfRangeIsInvalidArgument) {
  const Case c = LoadCase("sparse_categorical");
  v1::EvaluateRequest req = Chunk(c, 0, 3);
  (*req.mutable_targets())["head"].set_int64_val(0, 17);
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  const grpc::Status s = Stub()->Evaluate(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("class id 17"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace rnnserve::testing
