// The real rnnserve binary on a loopback port, called through the C++ client and through
// rnnserve-cli, against Keras's own predictions for the example model.

#include <cstdio>
#include <filesystem>

#include "client/client.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

bool Close(const client::NpyArray& got, const client::NpyArray& want, double rtol = 1e-5) {
  if (got.shape != want.shape) return false;
  for (size_t i = 0; i < got.values.size(); ++i) {
    if (std::fabs(got.values[i] - want.values[i]) > 1e-6 + rtol * std::fabs(want.values[i])) {
      return false;
    }
  }
  return true;
}

class ExampleServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = ServerProcess::Start(SourcePath("models/examples"));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  client::RnnServeClient Client() { return client::RnnServeClient({.server = server_->address()}); }
  std::map<std::string, client::NpyArray> GoodInput() {
    return {{"waveform", LoadNpy("tests/fixtures/example/input.npy")}};
  }
  absl::Status PredictStatus(const v1::PredictRequest& req) {
    auto stub = v1::RnnServe::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::PredictResponse resp;
    const grpc::Status s = stub->Predict(&ctx, req, &resp);
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  // A well-formed request for the example model, with a [B, T, F] float input.
  v1::PredictRequest Request(int64_t B, int64_t T, int64_t F) {
    v1::PredictRequest req;
    req.mutable_model_spec()->set_name("waveform_lstm");
    v1::Tensor& t = (*req.mutable_inputs())["waveform"];
    t.set_dtype(v1::TYPE_FP32);
    t.add_shape(B);
    t.add_shape(T);
    t.add_shape(F);
    for (int64_t i = 0; i < B * T * F; ++i) t.add_float_val(0.01f * static_cast<float>(i % 7));
    return req;
  }
  void ExpectGoodAnswer() {
    auto client = Client();
    auto resp = client.Predict("waveform_lstm", GoodInput(), {});
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_TRUE(Close(client::ToArray(resp->outputs().at("probabilities")),
                      LoadNpy("tests/fixtures/example/expected.npy")));
  }
  static ServerProcess* server_;
};
ServerProcess* ExampleServerTest::server_ = nullptr;

TEST_F(ExampleServerTest, PredictMatchesKerasForMixedLengths) { ExpectGoodAnswer(); }

TEST_F(ExampleServerTest, PredictWithExplicitLengthsMatchesKeras) {
  auto client = Client();
  auto resp = client.Predict("waveform_lstm", GoodInput(), {40, 25, 12});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(Close(client::ToArray(resp->outputs().at("probabilities")),
                    LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(ExampleServerTest, CliPredictWritesKerasNumbersToNpz) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("rnnserve_cli_" + std::to_string(getpid()) + ".npz"))
          .string();
  std::string log;
  const int rc = RunCommand({RNNSERVE_CLI_BIN, "predict", "--server", server_->address(), "--model",
                             "waveform_lstm", "--input",
                             SourcePath("models/examples/waveform_lstm/sample_input.json"),
                             "--output", out},
                            &log);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("probabilities: FP32 [3,3]"), std::string::npos) << log;
  auto arrays = client::ReadNpz(out);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  EXPECT_TRUE(Close(arrays->at("probabilities"), LoadNpy("tests/fixtures/example/expected.npy")));
  std::remove(out.c_str());
}

TEST_F(ExampleServerTest, CliListAndMetadataDescribeTheModel) {
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "list", "--server", server_->address(), "--json"}, &log), 0)
      << log;
  EXPECT_NE(log.find("\"name\":\"waveform_lstm\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"state\":\"READY\""), std::string::npos) << log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "metadata", "--server", server_->address(), "--model",
                        "waveform_lstm", "--json"},
                       &log),
            0)
      << log;
  EXPECT_NE(log.find("\"waveform\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"engine\": \"cpu\""), std::string::npos) << log;
}

TEST_F(ExampleServerTest, UnknownModelIsNotFound) {
  v1::PredictRequest req = Request(1, 5, 2);
  req.mutable_model_spec()->set_name("no_such_model");
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("no_such_model"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, WrongFeatureSizeNamesInputAndExpectedShape) {
  const absl::Status s = PredictStatus(Request(2, 5, 3));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("input 'waveform'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("expected [?,?,2]"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, WrongDtypeIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  v1::Tensor& t = (*req.mutable_inputs())["waveform"];
  t.clear_float_val();
  t.set_dtype(v1::TYPE_INT64);
  for (int i = 0; i < 8; ++i) t.add_int64_val(i);
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("expected TYPE_FP32"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, ValueCountMismatchIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  (*req.mutable_inputs())["waveform"].mutable_float_val()->RemoveLast();
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("needs 8 values, got 7"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, LengthPastTheTimeAxisIsInvalidArgument) {
  v1::PredictRequest req = Request(2, 4, 2);
  req.add_lengths(4);
  req.add_lengths(5);
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("lengths[1] = 5"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, UnexpectedExtraInputIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  (*req.mutable_inputs())["extra"] = req.inputs().at("waveform");
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("unexpected input 'extra'"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, EmptyBatchIsInvalidArgument) {
  const absl::Status s = PredictStatus(Request(0, 4, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("empty batch"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, BatchLargerThanMaxBatchSizeIsSplitAndJoined) {
  // max_batch_size is 64: 150 sequences run as three engine calls, each row as if alone.
  auto client = Client();
  const client::NpyArray one = LoadNpy("tests/fixtures/example/input.npy");
  client::NpyArray big = one;
  big.shape[0] = 150;
  big.values.clear();
  for (int i = 0; i < 50; ++i) big.values.insert(big.values.end(), one.values.begin(), one.values.end());
  auto resp = client.Predict("waveform_lstm", {{"waveform", big}}, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const client::NpyArray got = client::ToArray(resp->outputs().at("probabilities"));
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  ASSERT_EQ(got.shape, (std::vector<int64_t>{150, 3}));
  for (int i = 0; i < 150; ++i) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(got.values[i * 3 + c], want.values[(i % 3) * 3 + c], 1e-5) << "row " << i;
    }
  }
}

TEST_F(ExampleServerTest, ServerKeepsServingAfterBadRequests) {
  PredictStatus(Request(0, 4, 2)).IgnoreError();
  PredictStatus(Request(2, 5, 3)).IgnoreError();
  PredictStatus(Request(1, 0, 2)).IgnoreError();
  ASSERT_TRUE(server_->Alive());
  ExpectGoodAnswer();
}

TEST(ServerLifecycle, SigtermShutsDownCleanly) {
  auto s = ServerProcess::Start(SourcePath("models/examples"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->Stop(), 0);
}

TEST(ServerLifecycle, BadFlagIsRejectedWithUsage) {
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "--port", "notaport"}, &log), 2);
  EXPECT_NE(log.find("--port must be a port"), std::string::npos) << log;
}

}  // namespace
}  // namespace rnnserve::testing
