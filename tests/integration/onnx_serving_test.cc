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
// tests/fixtures/torch_lengths (models/scripts/make_torch_lengths_fixtures.py): a padded batch
// with lengths and PyTorch's answers on each row's truncated sequence; and a model that mixes
// time steps before its LSTM (x - x.mean(1)), which cannot honour lengths.
constexpr char kLengths[] = "LstmLastStepLengthZero";
constexpr char kRefused[] = "CenteredOverTimeRefused";

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
    for (const char* name : {kLengths, kRefused}) {
      fs::create_directories(*repo_ / name / "1");
      fs::copy_file(SourcePath(std::string("tests/fixtures/torch_lengths/") + name + "/model.onnx"),
                    *repo_ / name / "1" / "model.onnx");
    }
    StartServer(repo_->string());
  }
  static void TearDownTestSuite() {
    ServerSuite::TearDownTestSuite();
    fs::remove_all(*repo_);
    delete repo_;
  }
  static std::map<std::string, client::NpyArray> Data(
      const std::string& name, const std::string& family = "tests/fixtures/onnx/torch/") {
    auto d = client::ReadNpz(SourcePath(family + name + "/data.npz"));
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

// A PyTorch export has no sequence_lens: the request's lengths still give each row PyTorch's
// answer on its truncated sequence (last-step head, per-step outputs zero past the length, h_n
// and c_n at the length; a row of length 0 included).
TEST_F(OnnxServingTest, PredictWithLengthsGivesEachRowsTruncatedAnswer) {
  auto data = Data(kLengths, "tests/fixtures/torch_lengths/");
  std::vector<int32_t> lengths;
  for (double v : data.at("lengths").values) lengths.push_back(static_cast<int32_t>(v));
  client::RnnServeClient c({.server = server()->address()});
  auto resp = c.Predict(kLengths, {{"", data.at("in_0")}}, lengths);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->outputs_size(), 4);
  for (int k = 0; k < 4; ++k) {
    const std::string name = "y" + std::to_string(k);
    ASSERT_TRUE(resp->outputs().contains(name)) << name;
    const client::NpyArray got = client::ToArray(resp->outputs().at(name));
    EXPECT_TRUE(AllClose(
        engine::Tensor::Float(got.shape, std::vector<float>(got.values.begin(), got.values.end())),
        data.at("out_" + std::to_string(k))))
        << name;
  }
}

TEST_F(OnnxServingTest, LengthsOnAModelThatMixesTimeStepsAreInvalidArgumentNamingTheLayer) {
  auto data = Data(kRefused, "tests/fixtures/torch_lengths/");
  client::RnnServeClient c({.server = server()->address()});
  auto refused = c.Predict(kRefused, {{"", data.at("in_0")}}, {7, 3, 1, 5});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("'/ReduceMean'"), std::string::npos)
      << refused.status();
  // Without lengths it runs; the metadata says why lengths are refused.
  EXPECT_TRUE(c.Predict(kRefused, {{"", data.at("in_0")}}, {}).ok());
  auto meta = c.Metadata(kRefused);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_FALSE(meta->lengths());
  EXPECT_NE(meta->lengths_reason().find("/ReduceMean"), std::string::npos)
      << meta->lengths_reason();
  auto honoured = c.Metadata(kLengths);
  ASSERT_TRUE(honoured.ok()) << honoured.status();
  EXPECT_TRUE(honoured->lengths()) << honoured->lengths_reason();
}

}  // namespace
}  // namespace rnnserve::testing
