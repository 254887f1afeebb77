// KServe v2 REST: the JSON / binary body decoder (server/services/kserve/rest_codec.h) and the
// routes (rest_routes.h) over the example model, called in-process as the HTTP server would.
// Numbers are compared with Keras's own (tests/fixtures/example, made by
// models/scripts/make_example.py).

#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/metrics/server_metrics.h"
#include "server/model_config.h"
#include "server/model_repository.h"
#include "server/servable.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/kserve/model_config_view.h"
#include "server/services/kserve/rest_codec.h"
#include "server/services/kserve/rest_routes.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using json = nlohmann::json;
using server::kserve::ParseRestInfer;
using server::kserve::RestInferRequest;

absl::Status Parse(const std::string& body, std::optional<size_t> header_length = std::nullopt) {
  RestInferRequest r;
  return ParseRestInfer(body, header_length, &r);
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(KServeRestCodecTest, MalformedJsonIsInvalidArgument) {
  const absl::Status s = Parse("{\"inputs\": [");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, MissingInputsIsInvalidArgument) {
  EXPECT_EQ(Parse("{}").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Parse("[1, 2]").code(), absl::StatusCode::kInvalidArgument);
}

TEST(KServeRestCodecTest, WrongDatatypeNamesTheInput) {
  const absl::Status s =
      Parse(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("BYTES"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, StringInNumericDataNamesTheInput) {
  const absl::Status s =
      Parse(R"({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, "2"]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, FractionInIntegerDataIsRefused) {
  const absl::Status s =
      Parse(R"({"inputs": [{"name": "t", "shape": [2], "datatype": "INT64", "data": [1, 2.5]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("integers"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, Int32OutOfRangeIsRefused) {
  const absl::Status s = Parse(
      R"({"inputs": [{"name": "t", "shape": [1], "datatype": "INT32", "data": [3000000000]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("INT32"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, DataThatDoesNotFillTheShapeSaysHowMany) {
  const absl::Status s = Parse(
      R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds 3 values; shape [2,3] needs 6"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, NegativeAxisIsRefused) {
  EXPECT_EQ(
      Parse(R"({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]})").code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(KServeRestCodecTest, DeeplyNestedDataIsRefusedNotRecursed) {
  std::string data(10000, '[');
  data += std::string(10000, ']');
  const absl::Status s = Parse(absl::StrCat(
      R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": )", data, "}]}"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(KServeRestCodecTest, NestedAndFlatDataGiveTheSameBytes) {
  RestInferRequest flat, nested;
  ASSERT_TRUE(ParseRestInfer(
                  R"({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32",
                                  "data": [1, 2.5, -3, 4]}]})",
                  std::nullopt, &flat)
                  .ok());
  ASSERT_TRUE(ParseRestInfer(
                  R"({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32",
                                  "data": [[1, 2.5], [-3, 4]]}]})",
                  std::nullopt, &nested)
                  .ok());
  ASSERT_EQ(flat.inputs.inputs.size(), 1u);
  EXPECT_EQ(flat.inputs.inputs[0].bytes, Bytes({1, 2.5, -3, 4}));
  EXPECT_EQ(nested.inputs.inputs[0].bytes, flat.inputs.inputs[0].bytes);
  EXPECT_EQ(flat.inputs.inputs[0].shape, (engine::Shape{2, 2}));
}

TEST(KServeRestCodecTest, BinaryInputIsAViewOfTheBody) {
  const std::string header =
      R"({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32",
                      "parameters": {"binary_data_size": 12}}],
          "parameters": {"binary_data_output": true, "sequence_id": 7}})";
  const std::string body = header + Bytes({1, 2, 3});
  RestInferRequest r;
  ASSERT_TRUE(ParseRestInfer(body, header.size(), &r).ok());
  ASSERT_EQ(r.inputs.inputs.size(), 1u);
  EXPECT_EQ(r.inputs.inputs[0].bytes.data(), body.data() + header.size());  // no copy
  EXPECT_TRUE(r.inputs.default_raw);
  EXPECT_EQ(r.parameters.at("sequence_id").int64_param(), 7);
}

TEST(KServeRestCodecTest, BinarySizeThatDisagreesWithTheShapeIsRefused) {
  const std::string header =
      R"({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32",
                      "parameters": {"binary_data_size": 8}}]})";
  const absl::Status s = Parse(header + Bytes({1, 2}), header.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs 12"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, BinarySizesThatDoNotAddUpToTheBodyAreRefused) {
  const std::string header =
      R"({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32",
                      "parameters": {"binary_data_size": 8}}]})";
  // More bytes after the header than the inputs claim.
  absl::Status s = Parse(header + Bytes({1, 2, 3}), header.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("add up to 8"), std::string::npos) << s;
  // Fewer.
  s = Parse(header + Bytes({1}), header.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("runs past the body"), std::string::npos) << s;
  // Binary data without Inference-Header-Content-Length: the whole body is JSON.
  EXPECT_EQ(Parse(header).code(), absl::StatusCode::kInvalidArgument);
}

// A shape of 2^40 elements with one value: the count is refused, and nothing the size of the
// shape is allocated (the codec reserved 4 TiB for it and the call failed INTERNAL).
TEST(KServeRestCodecTest, HugeShapeWithFewValuesIsInvalidArgument) {
  const absl::Status s = Parse(
      R"({"inputs": [{"name": "x", "shape": [1099511627776], "datatype": "FP32", "data": [1]}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'data' holds 1 values; shape [1099511627776] needs 1099511627776"),
            std::string::npos)
      << s;
}

TEST(KServeRestCodecTest, HeaderLengthPastTheBodyIsRefused) {
  const std::string body = R"({"inputs": []})";
  const absl::Status s = Parse(body, body.size() + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("Inference-Header-Content-Length"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, OutputBinaryDataMustBeABool) {
  const absl::Status s =
      Parse(R"({"inputs": [], "outputs": [{"name": "y", "parameters": {"binary_data": 1}}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output 'y'"), std::string::npos) << s;
}

TEST(KServeRestCodecTest, ParameterOfObjectTypeIsRefused) {
  const absl::Status s = Parse(R"({"inputs": [], "parameters": {"priority": {"a": 1}}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("priority"), std::string::npos) << s;
}

// A model with sequence_batching and dynamic_batching keeps both in its ModelConfig answer:
// Triton's message holds one scheduling choice, so the dynamic batching shows as the sequence
// batcher's "oldest" strategy.
TEST(KServeModelConfigTest, SequenceBatchingKeepsItsDynamicBatchingAsTheOldestStrategy) {
  auto config = server::ReadModelConfig(SourcePath("models/examples/waveform_lstm"));
  ASSERT_TRUE(config.ok()) << config.status();
  config->set_name("waveform_lstm");
  config->mutable_dynamic_batching()->add_preferred_batch_size(4);
  config->mutable_dynamic_batching()->set_max_queue_delay_microseconds(500);
  config->mutable_sequence_batching()->set_max_sequence_idle_microseconds(5000000);
  config->mutable_sequence_batching()->set_max_sequences(32);
  auto servable = server::Servable::Load(SourcePath("models/examples/waveform_lstm"), 1, *config);
  ASSERT_TRUE(servable.ok()) << servable.status();
  const inference::ModelConfig out = server::kserve::TritonConfig(**servable);
  EXPECT_EQ(out.sequence_batching().max_sequence_idle_microseconds(), 5000000u);
  ASSERT_TRUE(out.sequence_batching().has_oldest()) << out.DebugString();
  const auto& oldest = out.sequence_batching().oldest();
  EXPECT_EQ(oldest.max_queue_delay_microseconds(), 500u);
  EXPECT_EQ(oldest.max_candidate_sequences(), 32);
  ASSERT_EQ(oldest.preferred_batch_size_size(), 1);
  EXPECT_EQ(oldest.preferred_batch_size(0), 4);
}

// The routes over the example model, called as the HTTP server calls them.
class KServeRestRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto repo = server::ModelRepository::Open(SourcePath("models/examples"),
                                              {.servable = {.metrics = &metrics_}});
    ASSERT_TRUE(repo.ok()) << repo.status();
    repository_ = *std::move(repo);
    service_ = std::make_unique<server::kserve::KServeService>(
        repository_.get(), server::kserve::KServeServiceOptions{.metrics = &metrics_});
    routes_ = std::make_unique<server::kserve::KServeRoutes>(service_.get());
  }

  server::http::Response Call(const std::string& method, const std::string& path,
                              std::string body = "",
                              std::vector<std::pair<std::string, std::string>> headers = {}) {
    server::http::Request request{.method = method,
                                  .path = path,
                                  .headers = std::move(headers),
                                  .body = std::move(body),
                                  .caller = "peer:test"};
    server::auth::Access access;
    EXPECT_TRUE(routes_->Owns(request, &access));
    std::promise<server::http::Response> answered;
    routes_->Handle(request, [&](server::http::Response r) { answered.set_value(std::move(r)); });
    return answered.get_future().get();
  }

  // The example input as a JSON request; `binary`: as binary data in and out.
  std::pair<std::string, size_t> InferBody(bool binary) {
    const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
    std::vector<float> values(x.values.begin(), x.values.end());
    json in = {{"name", "waveform"}, {"datatype", "FP32"}, {"shape", x.shape}};
    if (binary) {
      in["parameters"] = {{"binary_data_size", values.size() * sizeof(float)}};
    } else {
      in["data"] = values;
    }
    json request = {
        {"id", "r1"},
        {"inputs", json::array({in})},
        {"outputs",
         json::array({{{"name", "probabilities"}, {"parameters", {{"binary_data", binary}}}}})}};
    std::string header = request.dump();
    if (!binary) return {header, header.size()};
    return {header + Bytes(values), header.size()};
  }

  server::metrics::ServerMetrics metrics_;  // the statistics of both transports
  std::unique_ptr<server::ModelRepository> repository_;
  std::unique_ptr<server::kserve::KServeService> service_;
  std::unique_ptr<server::kserve::KServeRoutes> routes_;
};

engine::Tensor FloatTensor(const engine::Shape& shape, const float* data) {
  engine::Tensor t = engine::Tensor::Float(shape);
  std::memcpy(t.f32(), data, t.num_elements() * sizeof(float));
  return t;
}

TEST_F(KServeRestRoutesTest, JsonInferMatchesKeras) {
  const auto [body, header_length] = InferBody(/*binary=*/false);
  const server::http::Response r = Call("POST", "/v2/models/waveform_lstm/infer", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["id"], "r1");
  EXPECT_EQ(j["model_version"], "1");
  const json& out = j["outputs"][0];
  EXPECT_EQ(out["name"], "probabilities");
  const std::vector<float> values = out["data"].get<std::vector<float>>();
  EXPECT_TRUE(AllClose(FloatTensor(out["shape"].get<engine::Shape>(), values.data()),
                       LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(KServeRestRoutesTest, BinaryInferMatchesKeras) {
  const auto [body, header_length] = InferBody(/*binary=*/true);
  const server::http::Response r =
      Call("POST", "/v2/models/waveform_lstm/versions/1/infer", body,
           {{"inference-header-content-length", std::to_string(header_length)}});
  ASSERT_EQ(r.status, 200) << r.body;
  size_t json_length = 0;
  for (const auto& [k, v] : r.headers) {
    if (k == "Inference-Header-Content-Length") json_length = std::stoul(v);
  }
  ASSERT_GT(json_length, 0u);
  const json j = json::parse(r.body.substr(0, json_length));
  const json& out = j["outputs"][0];
  ASSERT_EQ(out["parameters"]["binary_data_size"], 9 * sizeof(float));
  ASSERT_EQ(r.body.size(), json_length + 9 * sizeof(float));
  std::vector<float> values(9);
  std::memcpy(values.data(), r.body.data() + json_length, 9 * sizeof(float));
  EXPECT_TRUE(AllClose(FloatTensor(out["shape"].get<engine::Shape>(), values.data()),
                       LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(KServeRestRoutesTest, LengthsParameterMatchesKeras) {
  auto [body, header_length] = InferBody(/*binary=*/false);
  json j = json::parse(body);
  j["parameters"] = {{"lengths", "40,25,12"}};
  const server::http::Response r = Call("POST", "/v2/models/waveform_lstm/infer", j.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  const json& out = answer["outputs"][0];
  const std::vector<float> values = out["data"].get<std::vector<float>>();
  EXPECT_TRUE(
      AllClose(FloatTensor({3, 3}, values.data()), LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(KServeRestRoutesTest, StatisticsAgreeWithGrpc) {
  const auto [body, header_length] = InferBody(/*binary=*/false);
  ASSERT_EQ(Call("POST", "/v2/models/waveform_lstm/infer", body).status, 200);
  const server::http::Response r = Call("GET", "/v2/models/waveform_lstm/stats");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model_stats"][0]["inference_count"], 3);  // a number, as Triton writes it
  grpc::ServerContext context;
  inference::ModelStatisticsRequest request;
  request.set_name("waveform_lstm");
  inference::ModelStatisticsResponse response;
  ASSERT_TRUE(service_->ModelStatistics(&context, &request, &response).ok());
  EXPECT_EQ(response.model_stats(0).inference_count(), 3u);
  EXPECT_EQ(response.model_stats(0).inference_stats().success().count(), 1u);
}

TEST_F(KServeRestRoutesTest, WrongShapeIs400NamingTheInput) {
  const server::http::Response r =
      Call("POST", "/v2/models/waveform_lstm/infer",
           R"({"inputs": [{"name": "waveform", "shape": [1, 2, 3], "datatype": "FP32",
                           "data": [1, 2, 3, 4, 5, 6]}]})");
  EXPECT_EQ(r.status, 400);
  const std::string error = json::parse(r.body)["error"];
  EXPECT_NE(error.find("INVALID_ARGUMENT"), std::string::npos) << error;
  EXPECT_NE(error.find("waveform"), std::string::npos) << error;
}

TEST_F(KServeRestRoutesTest, MalformedBodyIs400AndTheModelStillServes) {
  EXPECT_EQ(Call("POST", "/v2/models/waveform_lstm/infer", "{\"inputs\": [").status, 400);
  EXPECT_EQ(Call("POST", "/v2/models/waveform_lstm/infer", "x",
                 {{"inference-header-content-length", "9999"}})
                .status,
            400);
  EXPECT_EQ(Call("POST", "/v2/models/waveform_lstm/infer", InferBody(false).first).status, 200);
}

TEST_F(KServeRestRoutesTest, UnknownModelIs404) {
  const server::http::Response r =
      Call("POST", "/v2/models/no_such_model/infer", InferBody(false).first);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(Call("GET", "/v2/models/no_such_model").status, 404);
  EXPECT_EQ(Call("GET", "/v2/models/no_such_model/ready").status, 400);
  EXPECT_EQ(Call("GET", "/v2/nothing/here").status, 404);
}

TEST_F(KServeRestRoutesTest, WrongMethodIs405) {
  EXPECT_EQ(Call("GET", "/v2/models/waveform_lstm/infer").status, 405);
  EXPECT_EQ(Call("POST", "/v2/models/waveform_lstm").status, 405);
}

TEST_F(KServeRestRoutesTest, MetadataAndConfigDescribeTheModel) {
  server::http::Response r = Call("GET", "/v2/models/waveform_lstm");
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["inputs"][0]["name"], "waveform");
  EXPECT_EQ(j["inputs"][0]["shape"], json({-1, -1, 2}));
  r = Call("GET", "/v2/models/waveform_lstm/config");
  ASSERT_EQ(r.status, 200);
  j = json::parse(r.body);
  EXPECT_EQ(j["max_batch_size"], 64);
  EXPECT_EQ(j["input"][0]["dims"], json({-1, 2}));
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/waveform_lstm/ready").status, 200);
}

TEST_F(KServeRestRoutesTest, AccessIsPublicForHealthAndAdminForLoads) {
  server::auth::Access access;
  EXPECT_TRUE(routes_->Owns({.path = "/v2/health/live"}, &access));
  EXPECT_EQ(access, server::auth::Access::kPublic);
  EXPECT_TRUE(routes_->Owns({.path = "/v2/repository/models/m/load"}, &access));
  EXPECT_EQ(access, server::auth::Access::kAdmin);
  EXPECT_TRUE(routes_->Owns({.path = "/v2/repository/index"}, &access));
  EXPECT_EQ(access, server::auth::Access::kInference);
  EXPECT_FALSE(routes_->Owns({.path = "/v1/models/m:predict"}, &access));
  EXPECT_FALSE(routes_->Owns({.path = "/v2x"}, &access));
}

TEST_F(KServeRestRoutesTest, RepositoryUnloadAndLoad) {
  EXPECT_EQ(Call("POST", "/v2/repository/models/waveform_lstm/unload").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/waveform_lstm/ready").status, 400);
  EXPECT_EQ(Call("POST", "/v2/repository/models/waveform_lstm/load",
                 R"({"parameters": {"config": "{}"}})")
                .status,
            400);
  EXPECT_EQ(Call("POST", "/v2/repository/models/waveform_lstm/load").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/waveform_lstm/ready").status, 200);
  const json index = json::parse(Call("POST", "/v2/repository/index", "{}").body);
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0]["name"], "waveform_lstm");
  EXPECT_EQ(index[0]["state"], "READY");
}

}  // namespace
}  // namespace rnnserve::testing
