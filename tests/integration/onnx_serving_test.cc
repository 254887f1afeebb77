// ONNX files exported by PyTorch, served by the real binary from a repository that holds just
// the files (no config.pbtxt): Predict gives PyTorch's numbers, and the other RPCs work on them.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>

#include "client/client.h"
#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kLast[] = "TorchLstmLastStepLinearOpset20";
constexpr char kBidi[] = "TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17";

class OnnxServingTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    repo_ = new fs::path(fs::temp_directory_path() / ("rnnserve_onnx_" + std::to_string(getpid())));
    fs::remove_all(*repo_);
    for (const char* name : {kLast, kBidi}) {
      fs::create_directories(*repo_ / name / "1");
      fs::copy_file(SourcePath(std::string("tests/fixtures/onnx/torch/") + name + "/model.onnx"),
                    *repo_ / name / "1" / "model.onnx");
    }
    StartServer(repo_->string());
  }
  static void TearDownTestSuite() {
    ServerSuite::TearDownTestSuite();
    fs::remove_all(*repo_);
    delete repo_;
  }
  static std::map<std::string, client::NpyArray> Data(const std::string& name) {
    auto d = client::ReadNpz(SourcePath("tests/fixtures/onnx/torch/" + name + "/data.npz"));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : std::map<std::string, client::NpyArray>{};
  }
  static fs::path* repo_;
};
fs::path* OnnxServingTest::repo_ = nullptr;

TEST_F(OnnxServingTest, PredictMatchesPyTorch) {
  client::RnnServeClient c({.server = server()->address()});
  for (const char* name : {kLast, kBidi}) {
    auto data = Data(name);
    auto resp = c.Predict(name, {{"", data.at("in_0")}}, {});
    ASSERT_TRUE(resp.ok()) << name << ": " << resp.status();
    ASSERT_EQ(resp->outputs_size(), 1) << name;
    const client::NpyArray got = client::ToArray(resp->outputs().begin()->second);
    EXPECT_TRUE(AllClose(
        engine::Tensor::Float(got.shape, std::vector<float>(got.values.begin(), got.values.end())),
        data.at("out_0")))
        << name;
  }
}

TEST_F(OnnxServingTest, MetadataComesFromTheFileAndSaysWhyNotStreamable) {
  client::RnnServeClient c({.server = server()->address()});
  auto meta = c.Metadata(kBidi);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->platform(), "onnx");
  EXPECT_EQ(meta->masking(), "onnx");
  ASSERT_EQ(meta->inputs_size(), 1);
  EXPECT_EQ(meta->inputs(0).name(), "x");
  EXPECT_EQ(meta->inputs(0).shape(2), 4);
  EXPECT_FALSE(meta->streamable());
  EXPECT_NE(meta->streamable_reason().find("StreamPredict needs"), std::string::npos)
      << meta->streamable_reason();
}

TEST_F(OnnxServingTest, EvaluateWithANamedLossAgainstPyTorchOutputsIsNearZero) {
  auto data = Data(kLast);
  client::RnnServeClient c({.server = server()->address()});
  client::RnnServeClient::EvaluateOptions options;
  options.loss = "mse";
  options.metrics = {"mae"};
  auto resp = c.Evaluate(kLast, {{"", data.at("in_0")}}, {{"", data.at("out_0")}}, options);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_LT(resp->loss(), 1e-10);
  EXPECT_LT(resp->metrics().at("mae"), 1e-5);
  EXPECT_EQ(resp->samples(), 3);
}

TEST_F(OnnxServingTest, StreamingABidirectionalModelIsFailedPrecondition) {
  auto data = Data(kBidi);
  client::RnnServeClient c({.server = server()->address()});
  const absl::Status s = c.StreamSequences(
      kBidi, data.at("in_0"), 3, {}, 1, [](int64_t, int64_t, const v1::StreamPredictResponse&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

}  // namespace
}  // namespace rnnserve::testing
