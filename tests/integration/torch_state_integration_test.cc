// PyTorch exports as users bring them, served by the real binary (tests/fixtures/torch_state/,
// models/scripts/make_torch_state_fixtures.py):
//   - docs/import-onnx.md's initial-state recipe (h0 / c0 [1, batch, 32]) answers Predict at
//     batch sizes 1, 2 and 4 with PyTorch's numbers, with dynamic batching and without config;
//   - a plain causal nn.LSTM / nn.GRU + Linear (the exporter's zero-state Shape chain) streams:
//     StreamPredict and KServe sequence chunks give PyTorch's outputs on the whole sequence;
//   - a sequence request to a model that cannot stream (bidirectional) is refused
//     (FAILED_PRECONDITION) without an ERROR line in the server's log: the client's mistake.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/client.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using client::NpyArray;

constexpr char kDocs[] = "TorchLstmDocsRecipeH0C0";
constexpr char kStates[] = "TorchLstmBatchFirstStackedBidirectionalH0C0";
// Not streamable (bidirectional); from tests/fixtures/onnx/torch (make_onnx_fixtures.py).
constexpr char kBidirectional[] = "TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17";
const char* const kCausal[] = {"TorchLstmCausalLinearZeroState",
                               "TorchLstmStackedCausalLinearZeroState",
                               "TorchGruCausalLinearZeroState"};

std::map<std::string, NpyArray> Data(const std::string& fixture) {
  auto d = client::ReadNpz(SourcePath("tests/fixtures/torch_state/" + fixture + "/data.npz"));
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : std::map<std::string, NpyArray>{};
}

std::string Key(const char* kind, size_t k, int b) {
  return std::string(kind) + "_" + std::to_string(k) + "_b" + std::to_string(b);
}

engine::Tensor FloatTensor(const NpyArray& a) {
  return engine::Tensor::Float(a.shape, std::vector<float>(a.values.begin(), a.values.end()));
}

// Steps [t0, t1) of row b of a [B, T, C] array, as [1, t1 - t0, C].
NpyArray Steps(const NpyArray& x, int64_t b, int64_t t0, int64_t t1) {
  const int64_t T = x.shape[1], C = x.shape[2];
  NpyArray out{.descr = "<f4", .shape = {1, t1 - t0, C}};
  out.values.assign(x.values.begin() + (b * T + t0) * C, x.values.begin() + (b * T + t1) * C);
  return out;
}

class TorchStateServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new fs::path(fs::temp_directory_path() /
                         ("rnnserve_torch_state_" + std::to_string(getpid())));
    fs::remove_all(*repo_);
    auto add = [](const std::string& model, const std::string& fixture, const char* config) {
      fs::create_directories(*repo_ / model / "1");
      fs::copy_file(SourcePath("tests/fixtures/torch_state/" + fixture + "/model.onnx"),
                    *repo_ / model / "1" / "model.onnx");
      if (config != nullptr) std::ofstream(*repo_ / model / "config.pbtxt") << config;
    };
    add("docs_batched", kDocs,
        "platform: \"onnx\"\nmax_batch_size: 8\n"
        "dynamic_batching { max_queue_delay_microseconds: 100 }\n");
    add("docs_plain", kDocs, nullptr);
    add("states", kStates, nullptr);
    for (const char* f : kCausal) add(f, f, nullptr);
    fs::create_directories(*repo_ / "bidirectional" / "1");
    fs::copy_file(
        SourcePath(std::string("tests/fixtures/onnx/torch/") + kBidirectional + "/model.onnx"),
        *repo_ / "bidirectional" / "1" / "model.onnx");
    log_ = new std::string((*repo_ / "server.log").string());
    // At info level, so that the log shows the loads (and so is known to be read).
    auto s = ServerProcess::Start(repo_->string(), {"--log-level", "info"}, {}, *log_);
    if (s.ok()) server_ = s->release();
    if (!s.ok()) *log_ = std::string(s.status().message());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(*repo_);
    delete repo_;
    delete log_;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << "rnnserve did not start: " << *log_; }

  static std::string Log() {
    std::ifstream in(*log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::unique_ptr<inference::GRPCInferenceService::Stub> KServe() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  // A KServe sequence chunk of FP32 inputs.
  static inference::ModelInferRequest Chunk(
      const std::string& model, const std::vector<std::pair<std::string, NpyArray>>& inputs,
      int64_t id, bool start, bool end) {
    inference::ModelInferRequest req;
    req.set_model_name(model);
    for (const auto& [name, x] : inputs) {
      auto* in = req.add_inputs();
      in->set_name(name);
      in->set_datatype("FP32");
      for (int64_t d : x.shape) in->add_shape(d);
      for (double v : x.values) in->mutable_contents()->add_fp32_contents(static_cast<float>(v));
    }
    (*req.mutable_parameters())["sequence_id"].set_int64_param(id);
    (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*req.mutable_parameters())["sequence_end"].set_bool_param(end);
    return req;
  }

  static fs::path* repo_;
  static std::string* log_;
  static ServerProcess* server_;
};
fs::path* TorchStateServingTest::repo_ = nullptr;
std::string* TorchStateServingTest::log_ = nullptr;
ServerProcess* TorchStateServingTest::server_ = nullptr;

TEST_F(TorchStateServingTest, DocsRecipePredictMatchesPyTorchAtBatchSizes1To4) {
  client::RnnServeClient c({.server = server_->address()});
  const auto data = Data(kDocs);
  const char* const inputs[] = {"x", "h0", "c0"};
  const char* const outputs[] = {"y", "hn", "cn"};
  for (const char* model : {"docs_batched", "docs_plain"}) {
    for (int b : {1, 2, 4}) {
      std::map<std::string, NpyArray> request;
      for (size_t k = 0; k < 3; ++k) request[inputs[k]] = data.at(Key("in", k, b));
      auto resp = c.Predict(model, request, {});
      ASSERT_TRUE(resp.ok()) << model << " B=" << b << ": " << resp.status();
      for (size_t k = 0; k < 3; ++k) {
        const NpyArray got = client::ToArray(resp->outputs().at(outputs[k]));
        EXPECT_TRUE(AllClose(FloatTensor(got), data.at(Key("out", k, b))))
            << model << " " << outputs[k] << " B=" << b;
      }
    }
  }
}

TEST_F(TorchStateServingTest, MetadataShowsStatesInTheFilesLayout) {
  client::RnnServeClient c({.server = server_->address()});
  auto meta = c.Metadata("docs_batched");
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->inputs_size(), 3);
  EXPECT_EQ(meta->inputs(1).name(), "h0");
  ASSERT_EQ(meta->inputs(1).shape_size(), 3);
  EXPECT_EQ(meta->inputs(1).shape(0), 1);
  EXPECT_EQ(meta->inputs(1).shape(1), -1);
  EXPECT_EQ(meta->inputs(1).shape(2), 32);
}

TEST_F(TorchStateServingTest, KServeModelConfigLeavesOutEachTensorsBatchAxis) {
  inference::ModelConfigRequest req;
  req.set_name("docs_batched");
  inference::ModelConfigResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(KServe()->ModelConfig(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.config().input_size(), 3);
  EXPECT_EQ(resp.config().input(0).dims_size(), 2);  // x [batch, time, 6]: [-1, 6]
  for (int k : {1, 2}) {                             // h0, c0 [1, batch, 32]: [1, 32]
    ASSERT_EQ(resp.config().input(k).dims_size(), 2) << k;
    EXPECT_EQ(resp.config().input(k).dims(0), 1) << k;
    EXPECT_EQ(resp.config().input(k).dims(1), 32) << k;
  }
}

TEST_F(TorchStateServingTest, StreamedChunksOfTheZeroStateExportEqualPyTorchOnTheWhole) {
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  for (const char* model : kCausal) {
    const auto data = Data(model);
    const NpyArray& x = data.at("in_0");      // [3, 12, 4]
    const NpyArray& want = data.at("out_0");  // [3, 12, 3]
    grpc::ClientContext ctx;
    auto stream = stub->StreamPredict(&ctx);
    for (int64_t b = 0; b < x.shape[0]; ++b) {
      int64_t t0 = 0;
      for (int64_t size : {5, 4, 3}) {
        const int64_t t1 = t0 + size;
        v1::StreamPredictRequest req;
        req.mutable_model_spec()->set_name(model);
        req.set_sequence_id(10 + b);
        req.set_start(t0 == 0);
        req.set_end(t1 == x.shape[1]);
        auto chunk = client::ToTensor(Steps(x, b, t0, t1), /*integer=*/false);
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        (*req.mutable_inputs())["x"] = *chunk;
        ASSERT_TRUE(stream->Write(req));
        v1::StreamPredictResponse resp;
        ASSERT_TRUE(stream->Read(&resp));
        ASSERT_EQ(resp.error_code(), 0) << model << ": " << resp.error_message();
        EXPECT_TRUE(
            AllClose(FloatTensor(client::ToArray(resp.outputs().at("y"))), Steps(want, b, t0, t1)))
            << model << " row " << b << " steps " << t0 << ".." << t1;
        t0 = t1;
      }
    }
    stream->WritesDone();
    ASSERT_TRUE(stream->Finish().ok()) << model;
  }
}

TEST_F(TorchStateServingTest, KServeSequenceChunksOfTheZeroStateExportEqualPyTorchOnTheWhole) {
  auto stub = KServe();
  const char* model = kCausal[0];
  const auto data = Data(model);
  const NpyArray& x = data.at("in_0");
  const NpyArray& want = data.at("out_0");
  int64_t t0 = 0;
  for (int64_t size : {7, 5}) {
    const int64_t t1 = t0 + size;
    inference::ModelInferResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = stub->ModelInfer(
        &ctx, Chunk(model, {{"x", Steps(x, 1, t0, t1)}}, 501, t0 == 0, t1 == 12), &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    const std::string& raw = resp.raw_output_contents(0);
    std::vector<float> got(raw.size() / sizeof(float));
    std::memcpy(got.data(), raw.data(), raw.size());
    EXPECT_TRUE(AllClose(engine::Tensor::Float({1, t1 - t0, 3}, got), Steps(want, 1, t0, t1)))
        << "steps " << t0 << ".." << t1;
    t0 = t1;
  }
}

TEST_F(TorchStateServingTest, SequenceRequestToAModelThatCannotStreamIsNoErrorInTheLog) {
  auto data =
      client::ReadNpz(SourcePath("tests/fixtures/onnx/torch/") + kBidirectional + "/data.npz");
  ASSERT_TRUE(data.ok()) << data.status();
  inference::ModelInferResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status s = KServe()->ModelInfer(
      &ctx, Chunk("bidirectional", {{"x", Steps(data->at("in_0"), 0, 0, 7)}}, 7, true, false),
      &resp);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("StreamPredict"), std::string::npos) << s.error_message();
  // The server has answered; its log (which has its load lines) has no ERROR line.
  const std::string log = Log();
  ASSERT_NE(log.find("model bidirectional v1"), std::string::npos) << log;
  EXPECT_EQ(log.find("ERROR"), std::string::npos) << log;
}

}  // namespace
}  // namespace rnnserve::testing
