// The real server on Keras models as Keras users call them, against Keras's own predictions
// (tests/fixtures/keras, made by models/scripts/make_keras_fixtures.py):
//  - an Embedding model takes its token ids as whole-number FP32 / FP64 values, as Keras
//    (which declares the input float32) does, over rnnserve.v1 Predict and KServe ModelInfer;
//    a fractional id is INVALID_ARGUMENT naming the input;
//  - StreamPredict on a model whose InputLayer fixes the window ([None, 7, 3]) takes chunks
//    shorter than the window, and the last chunk's output is Keras's prediction for the whole
//    window; a stream past the window is refused, naming it. KServe sequence requests
//    (sequence_id) likewise.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "client/client.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kEmbedding[] = "Keras2EmbeddingMaskZero";  // Embedding(mask_zero) -> LSTM -> Dense
constexpr char kWindow[] = "Keras2StackedLstm";  // input_shape (7, 3): three LSTMs -> Dense

std::string Fixture(const std::string& name, const std::string& file) {
  return "tests/fixtures/keras/" + name + "/" + file;
}

std::vector<float> AsFloats(const client::NpyArray& a) {
  return std::vector<float>(a.values.begin(), a.values.end());
}

std::vector<double> AsDoubles(const client::NpyArray& a) { return a.values; }

template <typename T>
std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

::testing::AssertionResult MatchesKeras(const v1::Tensor& got, const std::string& case_name) {
  const client::NpyArray a = client::ToArray(got);
  return AllClose(engine::Tensor::Float(a.shape, AsFloats(a)),
                  LoadNpy(Fixture(case_name, "expected_0.npy")));
}

class KerasUsersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new fs::path(fs::temp_directory_path() /
                         ("rnnserve_keras_users_" + std::to_string(getpid())));
    fs::remove_all(*repo_);
    for (const char* name : {kEmbedding, kWindow}) {
      fs::create_directories(*repo_ / name / "1");
      fs::copy_file(SourcePath(Fixture(name, "model.h5")), *repo_ / name / "1" / "model.h5");
    }
    auto s = ServerProcess::Start(repo_->string());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(*repo_);
    delete repo_;
  }
  std::unique_ptr<v1::RnnServe::Stub> Stub() {
    return v1::RnnServe::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<inference::GRPCInferenceService::Stub> KServe() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  static grpc::Status Predict(v1::RnnServe::Stub* stub, const v1::Tensor& ids,
                              v1::PredictResponse* resp) {
    v1::PredictRequest req;
    req.mutable_model_spec()->set_name(kEmbedding);
    (*req.mutable_inputs())["ids"] = ids;
    grpc::ClientContext ctx;
    return stub->Predict(&ctx, req, resp);
  }
  static grpc::Status Infer(inference::GRPCInferenceService::Stub* stub,
                            const inference::ModelInferRequest& req,
                            inference::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    return stub->ModelInfer(&ctx, req, resp);
  }
  // The embedding fixture's ids [3, 6] as a KServe input of `datatype`.
  static inference::ModelInferRequest IdsRequest(const std::string& datatype, bool raw) {
    const client::NpyArray x = LoadNpy(Fixture(kEmbedding, "input_0.npy"));
    inference::ModelInferRequest req;
    req.set_model_name(kEmbedding);
    auto* in = req.add_inputs();
    in->set_name("ids");
    in->set_datatype(datatype);
    for (int64_t d : x.shape) in->add_shape(d);
    auto* c = in->mutable_contents();
    if (datatype == "FP32") {
      if (raw)
        *req.add_raw_input_contents() = Raw(AsFloats(x));
      else
        c->mutable_fp32_contents()->Add(x.values.begin(), x.values.end());
    } else {
      if (raw)
        *req.add_raw_input_contents() = Raw(AsDoubles(x));
      else
        c->mutable_fp64_contents()->Add(x.values.begin(), x.values.end());
    }
    if (raw) in->clear_contents();
    return req;
  }
  static ::testing::AssertionResult InferMatchesKeras(const inference::ModelInferResponse& resp) {
    if (resp.outputs_size() != 1 || resp.raw_output_contents_size() != 1) {
      return ::testing::AssertionFailure() << "expected one raw output";
    }
    const std::string& raw = resp.raw_output_contents(0);
    std::vector<float> got(raw.size() / sizeof(float));
    std::memcpy(got.data(), raw.data(), got.size() * sizeof(float));
    const engine::Shape shape(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end());
    return AllClose(engine::Tensor::Float(shape, got),
                    LoadNpy(Fixture(kEmbedding, "expected_0.npy")));
  }
  // The model's input name, which errors name.
  std::string InputName(const std::string& model) {
    v1::ModelMetadataRequest req;
    req.mutable_model_spec()->set_name(model);
    v1::ModelMetadataResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(Stub()->ModelMetadata(&ctx, req, &resp).ok());
    return resp.inputs_size() > 0 ? resp.inputs(0).name() : "";
  }
  static ServerProcess* server_;
  static fs::path* repo_;
};
ServerProcess* KerasUsersTest::server_ = nullptr;
fs::path* KerasUsersTest::repo_ = nullptr;

TEST_F(KerasUsersTest, PredictTakesWholeNumberFloatTokenIdsAsKerasDoes) {
  const client::NpyArray x = LoadNpy(Fixture(kEmbedding, "input_0.npy"));
  auto stub = Stub();
  v1::Tensor fp32;
  fp32.set_dtype(v1::TYPE_FP32);
  fp32.mutable_shape()->Add(x.shape.begin(), x.shape.end());
  fp32.mutable_float_val()->Add(x.values.begin(), x.values.end());
  v1::Tensor fp64;
  fp64.set_dtype(v1::TYPE_FP64);
  fp64.mutable_shape()->Add(x.shape.begin(), x.shape.end());
  fp64.mutable_double_val()->Add(x.values.begin(), x.values.end());
  v1::Tensor fp64_raw = fp64;
  fp64_raw.clear_double_val();
  fp64_raw.set_raw_content(Raw(AsDoubles(x)));
  for (const v1::Tensor* ids : {&fp32, &fp64, &fp64_raw}) {
    v1::PredictResponse resp;
    const grpc::Status s = Predict(stub.get(), *ids, &resp);
    ASSERT_TRUE(s.ok()) << v1::DataType_Name(ids->dtype()) << ": " << s.error_message();
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_TRUE(MatchesKeras(resp.outputs().begin()->second, kEmbedding))
        << v1::DataType_Name(ids->dtype());
  }
}

TEST_F(KerasUsersTest, PredictRefusesAFractionalTokenIdNamingTheInput) {
  const client::NpyArray x = LoadNpy(Fixture(kEmbedding, "input_0.npy"));
  v1::Tensor ids;
  ids.set_dtype(v1::TYPE_FP32);
  ids.mutable_shape()->Add(x.shape.begin(), x.shape.end());
  ids.mutable_float_val()->Add(x.values.begin(), x.values.end());
  ids.set_float_val(4, 2.5f);
  v1::PredictResponse resp;
  const grpc::Status s = Predict(Stub().get(), ids, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string what = "input '" + InputName(kEmbedding) + "'";
  EXPECT_NE(s.error_message().find(what), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("whole numbers"), std::string::npos) << s.error_message();
}

TEST_F(KerasUsersTest, ModelInferTakesWholeNumberFp32AndFp64TokenIds) {
  auto stub = KServe();
  for (const char* datatype : {"FP32", "FP64"}) {
    for (bool raw : {false, true}) {
      inference::ModelInferResponse resp;
      const grpc::Status s = Infer(stub.get(), IdsRequest(datatype, raw), &resp);
      ASSERT_TRUE(s.ok()) << datatype << (raw ? " raw: " : ": ") << s.error_message();
      EXPECT_TRUE(InferMatchesKeras(resp)) << datatype << (raw ? " raw" : "");
    }
  }
}

TEST_F(KerasUsersTest, ModelInferRefusesAFractionalTokenIdNamingTheInput) {
  inference::ModelInferRequest req = IdsRequest("FP64", false);
  req.mutable_inputs(0)->mutable_contents()->set_fp64_contents(2, 3.25);
  inference::ModelInferResponse resp;
  const grpc::Status s = Infer(KServe().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string what = "input '" + InputName(kEmbedding) + "'";
  EXPECT_NE(s.error_message().find(what), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("3.25"), std::string::npos) << s.error_message();
}

using Stream = grpc::ClientReaderWriter<v1::StreamPredictRequest, v1::StreamPredictResponse>;

// Steps [t0, t1) of sequence b of the window fixture's [B, 7, 3] input, as a [1, t1 - t0, 3]
// chunk.
v1::StreamPredictResponse SendSteps(Stream* stream, uint64_t id, int64_t b, int64_t t0, int64_t t1,
                                    bool start, bool end) {
  const client::NpyArray x = LoadNpy(Fixture(kWindow, "input_0.npy"));
  const int64_t T = x.shape[1], F = x.shape[2];
  v1::StreamPredictRequest req;
  req.mutable_model_spec()->set_name(kWindow);
  req.set_sequence_id(id);
  req.set_start(start);
  req.set_end(end);
  v1::Tensor& t = (*req.mutable_inputs())["x"];
  t.set_dtype(v1::TYPE_FP32);
  t.add_shape(1);
  t.add_shape(t1 - t0);
  t.add_shape(F);
  for (int64_t i = (b * T + t0) * F; i < (b * T + t1) * F; ++i) t.add_float_val(x.values[i]);
  EXPECT_TRUE(stream->Write(req));
  v1::StreamPredictResponse resp;
  EXPECT_TRUE(stream->Read(&resp));
  return resp;
}

TEST_F(KerasUsersTest, FixedWindowModelStreamsInChunksShorterThanTheWindow) {
  const client::NpyArray x = LoadNpy(Fixture(kWindow, "input_0.npy"));
  ASSERT_EQ(x.shape[1], 7);
  const client::NpyArray want = LoadNpy(Fixture(kWindow, "expected_0.npy"));
  const int64_t outs = want.shape[1];
  grpc::ClientContext ctx;
  auto stub = Stub();
  auto stream = stub->StreamPredict(&ctx);
  for (int64_t b = 0; b < x.shape[0]; ++b) {
    // Chunks of 3, 2 and 2 steps: the window of 7 in three pieces.
    v1::StreamPredictResponse last;
    const int64_t cuts[] = {0, 3, 5, 7};
    for (int c = 0; c < 3; ++c) {
      last = SendSteps(stream.get(), 10 + b, b, cuts[c], cuts[c + 1], c == 0, c == 2);
      ASSERT_EQ(last.error_code(), 0) << last.error_message();
    }
    const client::NpyArray got = client::ToArray(last.outputs().begin()->second);
    ASSERT_EQ(got.values.size(), static_cast<size_t>(outs));
    for (int64_t o = 0; o < outs; ++o) {
      const double w = want.values[b * outs + o];
      EXPECT_NEAR(got.values[o], w, 1e-6 + 1e-5 * std::fabs(w)) << "sequence " << b;
    }
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(KerasUsersTest, StreamPastTheWindowIsRefusedNamingItAndKeepsTheSequence) {
  grpc::ClientContext ctx;
  auto stub = Stub();
  auto stream = stub->StreamPredict(&ctx);
  v1::StreamPredictResponse r = SendSteps(stream.get(), 50, 0, 0, 5, true, false);
  ASSERT_EQ(r.error_code(), 0) << r.error_message();
  r = SendSteps(stream.get(), 50, 0, 3, 6, false, false);  // 5 + 3 > 7
  EXPECT_EQ(r.error_code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(r.error_message().find("window of 7 steps"), std::string::npos) << r.error_message();
  r = SendSteps(stream.get(), 50, 0, 5, 7, false, true);  // the sequence is still live: 5 + 2
  EXPECT_EQ(r.error_code(), 0) << r.error_message();
  const client::NpyArray want = LoadNpy(Fixture(kWindow, "expected_0.npy"));
  const client::NpyArray got = client::ToArray(r.outputs().begin()->second);
  for (size_t o = 0; o < got.values.size(); ++o) {
    EXPECT_NEAR(got.values[o], want.values[o], 1e-6 + 1e-5 * std::fabs(want.values[o]));
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(KerasUsersTest, KServeSequenceChunksOfAFixedWindowEqualKerasOnTheWindow) {
  const client::NpyArray x = LoadNpy(Fixture(kWindow, "input_0.npy"));
  const client::NpyArray want = LoadNpy(Fixture(kWindow, "expected_0.npy"));
  const int64_t T = x.shape[1], F = x.shape[2], outs = want.shape[1];
  auto stub = KServe();
  auto chunk = [&](int64_t t0, int64_t t1, bool start, bool end) {
    inference::ModelInferRequest req;
    req.set_model_name(kWindow);
    (*req.mutable_parameters())["sequence_id"].set_int64_param(77);
    (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*req.mutable_parameters())["sequence_end"].set_bool_param(end);
    auto* in = req.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(t1 - t0);
    in->add_shape(F);
    for (int64_t i = t0 * F; i < t1 * F; ++i) {
      in->mutable_contents()->add_fp32_contents(static_cast<float>(x.values[i]));
    }
    inference::ModelInferResponse resp;
    const grpc::Status s = Infer(stub.get(), req, &resp);
    return std::make_pair(s, resp);
  };
  ASSERT_TRUE(chunk(0, 4, true, false).first.ok());
  const auto past = chunk(2, 6, false, false);  // 4 + 4 > 7: refused, the sequence kept
  EXPECT_EQ(past.first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(past.first.error_message().find("window of 7 steps"), std::string::npos)
      << past.first.error_message();
  const auto last = chunk(4, T, false, true);
  ASSERT_TRUE(last.first.ok()) << last.first.error_message();
  const std::string& raw = last.second.raw_output_contents(0);
  ASSERT_EQ(raw.size(), outs * sizeof(float));
  std::vector<float> got(outs);
  std::memcpy(got.data(), raw.data(), raw.size());
  for (int64_t o = 0; o < outs; ++o) {
    EXPECT_NEAR(got[o], want.values[o], 1e-6 + 1e-5 * std::fabs(want.values[o]));
  }
}

TEST_F(KerasUsersTest, MetadataSaysTheFixedWindowModelStreams) {
  v1::ModelMetadataRequest req;
  req.mutable_model_spec()->set_name(kWindow);
  v1::ModelMetadataResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(Stub()->ModelMetadata(&ctx, req, &resp).ok());
  EXPECT_TRUE(resp.streamable()) << resp.streamable_reason();
  ASSERT_EQ(resp.inputs_size(), 1);
  EXPECT_EQ(resp.inputs(0).shape(1), 7);
}

}  // namespace
}  // namespace rnnserve::testing
