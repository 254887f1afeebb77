// The KServe v2 / Open Inference Protocol endpoint of the real rnnserve binary, called with a
// C++ stub generated from proto/inference, against Keras's own predictions for the example
// model. The official Python tools (tritonclient, perf_analyzer) are exercised by
// kserve_tritonclient_test.py and kserve_perf_analyzer_test.py.

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

class KServeTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() { StartServer(SourcePath("models/examples")); }
  std::unique_ptr<inference::GRPCInferenceService::Stub> Stub() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  }
  // The example fixture [3, 40, 2] as one FP32 input, raw or typed.
  ModelInferRequest FixtureRequest(bool raw) {
    const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
    ModelInferRequest req;
    req.set_model_name("waveform_lstm");
    auto* in = req.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    for (int64_t d : x.shape) in->add_shape(d);
    std::vector<float> v(x.values.begin(), x.values.end());
    if (raw) {
      req.add_raw_input_contents()->assign(reinterpret_cast<const char*>(v.data()),
                                           v.size() * sizeof(float));
    } else {
      in->mutable_contents()->mutable_fp32_contents()->Add(v.begin(), v.end());
    }
    return req;
  }
  grpc::Status Infer(const ModelInferRequest& req, ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    return Stub()->ModelInfer(&ctx, req, resp);
  }
  // The values of output 0 of a response, raw or typed.
  static std::vector<float> Output0(const ModelInferResponse& resp) {
    std::vector<float> got;
    if (resp.raw_output_contents_size() > 0 && !resp.raw_output_contents(0).empty()) {
      const std::string& raw = resp.raw_output_contents(0);
      got.resize(raw.size() / sizeof(float));
      std::memcpy(got.data(), raw.data(), got.size() * sizeof(float));
    } else if (resp.outputs_size() > 0) {
      const auto& typed = resp.outputs(0).contents().fp32_contents();
      got.assign(typed.begin(), typed.end());
    }
    return got;
  }
  // Output 0 of a response, raw or typed, compared with Keras's expected values.
  static ::testing::AssertionResult MatchesKeras(const ModelInferResponse& resp) {
    if (resp.outputs_size() < 1) return ::testing::AssertionFailure() << "no outputs";
    const auto& out = resp.outputs(0);
    const std::vector<float> got = Output0(resp);
    engine::Shape shape(out.shape().begin(), out.shape().end());
    if (engine::NumElements(shape) != static_cast<int64_t>(got.size())) {
      return ::testing::AssertionFailure()
             << "shape " << engine::ShapeString(shape) << " holds " << got.size() << " values";
    }
    return AllClose(engine::Tensor::Float(shape, got),
                    LoadNpy("tests/fixtures/example/expected.npy"));
  }
};

TEST_F(KServeTest, ServerIsLiveAndReadyAndModelIsReady) {
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse r;
    ASSERT_TRUE(stub->ServerLive(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    ASSERT_TRUE(stub->ServerReady(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  for (const auto& [name, ready] :
       {std::pair<std::string, bool>{"waveform_lstm", true}, {"no_such_model", false}}) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name(name);
    inference::ModelReadyResponse r;
    ASSERT_TRUE(stub->ModelReady(&ctx, req, &r).ok()) << name;
    EXPECT_EQ(r.ready(), ready) << name;
  }
}

TEST_F(KServeTest, ServerMetadataListsStatisticsExtension) {
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse r;
  ASSERT_TRUE(Stub()->ServerMetadata(&ctx, {}, &r).ok());
  EXPECT_EQ(r.name(), "rnnserve");
  EXPECT_FALSE(r.version().empty());
  EXPECT_NE(std::find(r.extensions().begin(), r.extensions().end(), "statistics"),
            r.extensions().end());
  EXPECT_NE(std::find(r.extensions().begin(), r.extensions().end(), "model_configuration"),
            r.extensions().end());
}

TEST_F(KServeTest, ModelMetadataShowsBatchAxisAndDatatypes) {
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest req;
  req.set_name("waveform_lstm");
  inference::ModelMetadataResponse r;
  ASSERT_TRUE(Stub()->ModelMetadata(&ctx, req, &r).ok());
  ASSERT_EQ(r.inputs_size(), 1);
  EXPECT_EQ(r.inputs(0).name(), "waveform");
  EXPECT_EQ(r.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(r.inputs(0).shape().begin(), r.inputs(0).shape().end()),
            (std::vector<int64_t>{-1, -1, 2}));
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "probabilities");
  EXPECT_EQ(std::vector<int64_t>(r.outputs(0).shape().begin(), r.outputs(0).shape().end()),
            (std::vector<int64_t>{-1, 3}));
  ASSERT_EQ(r.versions_size(), 1);
  EXPECT_EQ(r.versions(0), "1");
}

TEST_F(KServeTest, ModelConfigLeavesOutBatchAxisBesideMaxBatchSize) {
  grpc::ClientContext ctx;
  inference::ModelConfigRequest req;
  req.set_name("waveform_lstm");
  inference::ModelConfigResponse r;
  ASSERT_TRUE(Stub()->ModelConfig(&ctx, req, &r).ok());
  EXPECT_EQ(r.config().name(), "waveform_lstm");
  EXPECT_EQ(r.config().max_batch_size(), 64);
  ASSERT_EQ(r.config().input_size(), 1);
  EXPECT_EQ(r.config().input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(
      std::vector<int64_t>(r.config().input(0).dims().begin(), r.config().input(0).dims().end()),
      (std::vector<int64_t>{-1, 2}));
  ASSERT_EQ(r.config().output_size(), 1);
  EXPECT_EQ(r.config().output(0).dims_size(), 1);
}

TEST_F(KServeTest, RawInputContentsMatchKeras) {
  ModelInferResponse resp;
  const grpc::Status s = Infer(FixtureRequest(/*raw=*/true), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_name(), "waveform_lstm");
  EXPECT_EQ(resp.model_version(), "1");
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  EXPECT_EQ(resp.raw_output_contents_size(), 1);
  EXPECT_TRUE(MatchesKeras(resp));
}

TEST_F(KServeTest, TypedContentsMatchKeras) {
  ModelInferResponse resp;
  const grpc::Status s = Infer(FixtureRequest(/*raw=*/false), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(MatchesKeras(resp));
}

TEST_F(KServeTest, LengthsAsInt32InputMatchKeras) {
  ModelInferRequest req = FixtureRequest(/*raw=*/false);
  auto* lengths = req.add_inputs();
  lengths->set_name("lengths");
  lengths->set_datatype("INT32");
  lengths->add_shape(3);
  for (int v : {40, 25, 12}) lengths->mutable_contents()->add_int_contents(v);
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(MatchesKeras(resp));
}

TEST_F(KServeTest, LengthsAsParameterMatchKeras) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  (*req.mutable_parameters())["lengths"].set_string_param("40,25,12");
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(MatchesKeras(resp));
}

// Length 0 (engine/lengths.h) over KServe: the other rows keep Keras's numbers, and the
// empty row answers as an all-zero row, which the model's Masking layer masks at every step.
TEST_F(KServeTest, ZeroLengthSequenceAnswersAsAFullyMaskedOne) {
  ModelInferRequest req = FixtureRequest(/*raw=*/false);
  (*req.mutable_parameters())["lengths"].set_string_param("40,0,12");
  ModelInferResponse resp;
  grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<float> got = Output0(resp);
  ASSERT_EQ(got.size(), 9u);
  ModelInferRequest zero;
  zero.set_model_name("waveform_lstm");
  auto* in = zero.add_inputs();
  in->set_name("waveform");
  in->set_datatype("FP32");
  for (int64_t d : {1, 40, 2}) in->add_shape(d);
  for (int i = 0; i < 80; ++i) in->mutable_contents()->add_fp32_contents(0.0f);
  ModelInferResponse masked;
  s = Infer(zero, &masked);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<float> want_masked = Output0(masked);
  ASSERT_EQ(want_masked.size(), 3u);
  const client::NpyArray keras = LoadNpy("tests/fixtures/example/expected.npy");
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(got[k], keras.values[k], 1e-5) << "row 0, class " << k;
    EXPECT_NEAR(got[3 + k], want_masked[k], 1e-6) << "row 1, class " << k;
    EXPECT_NEAR(got[6 + k], keras.values[6 + k], 1e-5) << "row 2, class " << k;
  }
}

TEST_F(KServeTest, LengthPastTimeAxisIsInvalidArgument) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  (*req.mutable_parameters())["lengths"].set_string_param("40,41,12");
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("lengths[1] = 41"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, RequestedOutputAsTypedContents) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  auto* out = req.add_outputs();
  out->set_name("probabilities");
  (*out->mutable_parameters())["binary_data"].set_bool_param(false);
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).contents().fp32_contents_size(), 9);
  EXPECT_TRUE(MatchesKeras(resp));
}

TEST_F(KServeTest, UnknownRequestedOutputIsInvalidArgument) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  req.add_outputs()->set_name("logits");
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'logits'"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("probabilities"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, UnknownModelIsNotFound) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  req.set_model_name("no_such_model");
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no_such_model"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, NonNumericVersionIsInvalidArgument) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  req.set_model_version("latest");
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'latest'"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, WrongFeatureSizeNamesInputAndExpectedShape) {
  ModelInferRequest req;
  req.set_model_name("waveform_lstm");
  auto* in = req.add_inputs();
  in->set_name("waveform");
  in->set_datatype("FP32");
  for (int64_t d : {2, 5, 3}) in->add_shape(d);
  for (int i = 0; i < 30; ++i) in->mutable_contents()->add_fp32_contents(0.1f);
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("input 'waveform'"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("expected [?,?,2]"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, WrongDatatypeNamesExpectedDatatype) {
  ModelInferRequest req;
  req.set_model_name("waveform_lstm");
  auto* in = req.add_inputs();
  in->set_name("waveform");
  in->set_datatype("INT64");
  for (int64_t d : {1, 2, 2}) in->add_shape(d);
  for (int i = 0; i < 4; ++i) in->mutable_contents()->add_int64_contents(i);
  ModelInferResponse resp;
  grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("datatype INT64 given, expected FP32"), std::string::npos)
      << s.error_message();
  in->set_datatype("FP16");
  s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'FP16' is not accepted"), std::string::npos)
      << s.error_message();
}

TEST_F(KServeTest, RawContentsOfWrongSizeNameTheByteCounts) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  req.mutable_raw_input_contents(0)->resize(100);
  ModelInferResponse resp;
  grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("holds 100 bytes"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("needs 960"), std::string::npos) << s.error_message();
  req.add_raw_input_contents("extra");
  s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("2 entries given for 1 inputs"), std::string::npos)
      << s.error_message();
}

TEST_F(KServeTest, TypedContentsOfWrongCountAreInvalidArgument) {
  ModelInferRequest req = FixtureRequest(/*raw=*/false);
  req.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->RemoveLast();
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("needs 240 values, got 239"), std::string::npos)
      << s.error_message();
}

TEST_F(KServeTest, SequenceChunksCarryServerHeldStateAndEqualKeras) {
  // Sequence 0 of the fixture (40 steps) as two requests of sequence 42.
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  ModelInferResponse resp;
  // One channel for the whole sequence: without a token a sequence belongs to the connection
  // that started it (docs/security.md).
  auto stub = Stub();
  auto infer = [&](const ModelInferRequest& req) {
    grpc::ClientContext ctx;
    return stub->ModelInfer(&ctx, req, &resp);
  };
  for (int half = 0; half < 2; ++half) {
    ModelInferRequest req;
    req.set_model_name("waveform_lstm");
    auto* in = req.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(20);
    in->add_shape(2);
    for (int64_t i = half * 40; i < (half + 1) * 40; ++i) {
      in->mutable_contents()->add_fp32_contents(static_cast<float>(x.values[i]));
    }
    (*req.mutable_parameters())["sequence_id"].set_int64_param(42);
    (*req.mutable_parameters())["sequence_start"].set_bool_param(half == 0);
    (*req.mutable_parameters())["sequence_end"].set_bool_param(half == 1);
    const grpc::Status s = infer(req);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<float> got(3);
  std::memcpy(got.data(), resp.raw_output_contents(0).data(), 3 * sizeof(float));
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want.values[c], 1e-5);
  // The sequence ended: a further chunk without start is refused.
  ModelInferRequest more = FixtureRequest(/*raw=*/true);
  (*more.mutable_parameters())["sequence_id"].set_int64_param(42);
  EXPECT_EQ(infer(more).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(KServeTest, SequenceStartWithoutIdIsInvalidArgument) {
  ModelInferRequest req = FixtureRequest(/*raw=*/true);
  (*req.mutable_parameters())["sequence_start"].set_bool_param(true);
  ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("sequence_id"), std::string::npos) << s.error_message();
}

TEST_F(KServeTest, StreamAnswersEachRequestInOrderAndCarriesErrors) {
  grpc::ClientContext ctx;
  auto stream = Stub()->ModelStreamInfer(&ctx);
  ModelInferRequest good = FixtureRequest(/*raw=*/true);
  good.set_id("a");
  ModelInferRequest bad = good;
  bad.set_id("b");
  bad.set_model_name("no_such_model");
  ModelInferRequest seq = good;
  seq.set_id("c");
  (*seq.mutable_parameters())["sequence_id"].set_string_param("user-7");
  ModelInferRequest again = good;
  again.set_id("d");
  for (const auto* r : {&good, &bad, &seq, &again}) ASSERT_TRUE(stream->Write(*r));
  stream->WritesDone();
  std::vector<inference::ModelStreamInferResponse> got;
  inference::ModelStreamInferResponse r;
  while (stream->Read(&r)) got.push_back(r);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].error_message(), "");
  EXPECT_EQ(got[0].infer_response().id(), "a");
  EXPECT_TRUE(MatchesKeras(got[0].infer_response()));
  EXPECT_EQ(got[1].infer_response().id(), "b");
  EXPECT_NE(got[1].error_message().find("NOT_FOUND"), std::string::npos) << got[1].error_message();
  EXPECT_EQ(got[2].infer_response().id(), "c");
  // A sequence request carries one sequence; this one carries three.
  EXPECT_NE(got[2].error_message().find("INVALID_ARGUMENT"), std::string::npos)
      << got[2].error_message();
  EXPECT_NE(got[2].error_message().find("'user-7'"), std::string::npos) << got[2].error_message();
  EXPECT_EQ(got[3].infer_response().id(), "d");
  EXPECT_TRUE(MatchesKeras(got[3].infer_response()));
}

TEST_F(KServeTest, StatisticsCountSequencesAndFailures) {
  auto stats = [&]() {
    grpc::ClientContext ctx;
    inference::ModelStatisticsRequest req;
    req.set_name("waveform_lstm");
    inference::ModelStatisticsResponse r;
    EXPECT_TRUE(Stub()->ModelStatistics(&ctx, req, &r).ok());
    return r.model_stats_size() == 1 ? r.model_stats(0) : inference::ModelStatistics();
  };
  const inference::ModelStatistics before = stats();
  ModelInferResponse resp;
  ASSERT_TRUE(Infer(FixtureRequest(/*raw=*/true), &resp).ok());
  ModelInferRequest bad = FixtureRequest(/*raw=*/true);
  bad.mutable_raw_input_contents(0)->resize(4);
  ASSERT_FALSE(Infer(bad, &resp).ok());
  const inference::ModelStatistics after = stats();
  EXPECT_EQ(after.name(), "waveform_lstm");
  EXPECT_EQ(after.version(), "1");
  EXPECT_EQ(after.inference_count() - before.inference_count(), 3u);
  EXPECT_EQ(after.execution_count() - before.execution_count(), 1u);
  EXPECT_EQ(after.inference_stats().success().count() - before.inference_stats().success().count(),
            1u);
  EXPECT_EQ(after.inference_stats().fail().count() - before.inference_stats().fail().count(), 1u);
  EXPECT_GT(after.inference_stats().compute_infer().ns(),
            before.inference_stats().compute_infer().ns());
  EXPECT_GT(after.last_inference(), 0u);
}

TEST_F(KServeTest, StatisticsOfUnknownModelIsNotFound) {
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest req;
  req.set_name("no_such_model");
  inference::ModelStatisticsResponse r;
  EXPECT_EQ(Stub()->ModelStatistics(&ctx, req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace rnnserve::testing
