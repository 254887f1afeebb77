// Every bad request of docs/errors.md, sent to the real server: each gets the documented status
// code and a message containing the documented excerpt, and the server then still answers a good
// request correctly.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using Stub = v1::RnnServe::Stub;

struct DocRow {
  std::string id, code, excerpt;
};

// Rows of the table in docs/errors.md: | id | request | code | message excerpt |
std::vector<DocRow> ReadDoc() {
  std::ifstream in(SourcePath("docs/errors.md"));
  std::vector<DocRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| E", 0) != 0) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 6) continue;
    auto cell = [&](int i) {
      std::string c(absl::StripAsciiWhitespace(cells[i]));
      return std::string(absl::StripSuffix(absl::StripPrefix(c, "`"), "`"));
    };
    rows.push_back({cell(1), cell(3), cell(4)});
  }
  return rows;
}

v1::Tensor Floats(std::vector<int64_t> shape, float value = 0.1f) {
  v1::Tensor t;
  t.set_dtype(v1::TYPE_FP32);
  int64_t n = 1;
  for (int64_t d : shape) {
    t.add_shape(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_val(value + 0.01f * static_cast<float>(i % 5));
  return t;
}

v1::PredictRequest Good(const std::string& model = "waveform_lstm") {
  v1::PredictRequest r;
  r.mutable_model_spec()->set_name(model);
  (*r.mutable_inputs())["waveform"] = Floats({2, 5, 2});
  return r;
}

v1::EvaluateRequest GoodEvaluate() {
  v1::EvaluateRequest r;
  r.mutable_model_spec()->set_name("waveform_lstm");
  (*r.mutable_inputs())["waveform"] = Floats({2, 5, 2});
  v1::Tensor& y = (*r.mutable_targets())["probabilities"];
  y.set_dtype(v1::TYPE_INT64);
  y.add_shape(2);
  y.add_int64_val(0);
  y.add_int64_val(2);
  return r;
}

grpc::Status Predict(Stub* stub, const v1::PredictRequest& r, int64_t deadline_ms = 30000) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  v1::PredictResponse resp;
  return stub->Predict(&ctx, r, &resp);
}

grpc::Status Evaluate(Stub* stub, const v1::EvaluateRequest& r) {
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  return stub->Evaluate(&ctx, r, &resp);
}

grpc::Status StreamChunk(Stub* stub, const v1::StreamPredictRequest& r) {
  grpc::ClientContext ctx;
  auto stream = stub->StreamPredict(&ctx);
  stream->Write(r);
  v1::StreamPredictResponse resp;
  stream->Read(&resp);
  stream->WritesDone();
  stream->Finish().IgnoreError();
  return grpc::Status(static_cast<grpc::StatusCode>(resp.error_code()), resp.error_message());
}

v1::StreamPredictRequest Chunk(bool start, int64_t batch) {
  v1::StreamPredictRequest r;
  r.mutable_model_spec()->set_name("waveform_lstm");
  r.set_sequence_id(77);
  r.set_start(start);
  (*r.mutable_inputs())["waveform"] = Floats({batch, 3, 2});
  return r;
}

// The request of each documented case.
// The server's channel, for the cases that send raw bytes (set by the test before the cases run).
std::shared_ptr<grpc::Channel>& RawChannel() {
  static auto* channel = new std::shared_ptr<grpc::Channel>();
  return *channel;
}

// `bytes` as the request of `method`, whatever they are.
grpc::Status RawCall(const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(RawChannel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

std::map<std::string, std::function<grpc::Status(Stub*)>> Cases() {
  std::map<std::string, std::function<grpc::Status(Stub*)>> c;
  c["E01"] = [](Stub* s) { return Predict(s, Good("no_such_model")); };
  c["E02"] = [](Stub* s) {
    auto r = Good();
    r.mutable_model_spec()->set_version(9);
    return Predict(s, r);
  };
  c["E03"] = [](Stub* s) { return Predict(s, Good("broken")); };
  c["E04"] = [](Stub* s) {
    auto r = Good();
    r.mutable_inputs()->clear();
    return Predict(s, r);
  };
  c["E05"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["extra"] = Floats({2, 5, 2});
    return Predict(s, r);
  };
  c["E06"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.set_dtype(v1::TYPE_INT32);
    t.clear_float_val();
    for (int i = 0; i < 20; ++i) t.add_int_val(i);
    return Predict(s, r);
  };
  c["E07"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"] = Floats({10, 2});
    return Predict(s, r);
  };
  c["E08"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"] = Floats({2, 5, 3});
    return Predict(s, r);
  };
  c["E09"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"].mutable_float_val()->RemoveLast();
    return Predict(s, r);
  };
  c["E10"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.clear_float_val();
    t.set_raw_content(std::string(19 * 4, '\0'));
    return Predict(s, r);
  };
  c["E11"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"].set_shape(1, -5);
    return Predict(s, r);
  };
  c["E12"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"] = Floats({0, 5, 2});
    return Predict(s, r);
  };
  c["E13"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"] = Floats({2, 0, 2});
    return Predict(s, r);
  };
  c["E14"] = [](Stub* s) {
    auto r = Good();
    r.add_lengths(5);
    return Predict(s, r);
  };
  c["E15"] = [](Stub* s) {
    auto r = Good();
    r.add_lengths(5);
    r.add_lengths(-1);
    return Predict(s, r);
  };
  c["E16"] = [](Stub* s) {
    auto r = Good();
    r.add_lengths(5);
    r.add_lengths(6);
    return Predict(s, r);
  };
  c["E17"] = [](Stub* s) {
    auto r = Good("strict");
    (*r.mutable_inputs())["waveform"].set_float_val(3, std::nanf(""));
    return Predict(s, r);
  };
  c["E38"] = [](Stub* s) {
    auto r = Good("strict");
    v1::LayerStates& states = (*r.mutable_initial_states())["lstm_1"];
    for (int i = 0; i < 2; ++i) *states.add_states() = Floats({2, 32}, 0.0f);
    states.mutable_states(1)->set_float_val(5, std::numeric_limits<float>::infinity());
    return Predict(s, r);
  };
  c["E18"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.set_dtype(v1::TYPE_FP64);
    return Predict(s, r);
  };
  c["E19"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.clear_shape();
    t.add_shape(100000);
    t.add_shape(100000);
    t.add_shape(2);
    return Predict(s, r);
  };
  c["E20"] = [](Stub* s) {
    auto r = Good();
    (*r.mutable_inputs())["waveform"] = Floats({1, 1 << 20, 2});  // 8 MiB of floats
    return Predict(s, r);
  };
  c["E21"] = [](Stub* s) {
    auto r = Good();
    r.add_output_filter("logits");
    return Predict(s, r);
  };
  c["E22"] = [](Stub* s) {
    auto r = Good();
    return Predict(s, r, -1000);
  };
  c["E23"] = [](Stub* s) {
    auto r = GoodEvaluate();
    r.mutable_targets()->clear();
    return Evaluate(s, r);
  };
  c["E24"] = [](Stub* s) {
    auto r = GoodEvaluate();
    v1::Tensor& y = (*r.mutable_targets())["probabilities"];
    y.add_shape(2);
    y.add_int64_val(1);
    y.add_int64_val(1);
    return Evaluate(s, r);
  };
  c["E25"] = [](Stub* s) {
    auto r = GoodEvaluate();
    (*r.mutable_targets())["probabilities"].set_int64_val(1, 3);
    return Evaluate(s, r);
  };
  c["E26"] = [](Stub* s) {
    auto r = GoodEvaluate();
    r.set_loss("hinge");
    return Evaluate(s, r);
  };
  c["E27"] = [](Stub* s) {
    auto r = GoodEvaluate();
    r.add_metrics("f1_score");
    return Evaluate(s, r);
  };
  c["E28"] = [](Stub* s) {
    auto r = GoodEvaluate();
    *r.mutable_sample_weight() = Floats({3});
    return Evaluate(s, r);
  };
  c["E29"] = [](Stub* s) {
    auto r = GoodEvaluate();
    *r.mutable_sample_weight() = Floats({2}, -1.0f);
    return Evaluate(s, r);
  };
  c["E30"] = [](Stub* s) { return StreamChunk(s, Chunk(false, 1)); };
  c["E31"] = [](Stub* s) { return StreamChunk(s, Chunk(true, 2)); };
  c["E32"] = [](Stub* s) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest r;
    r.set_name("../outside");
    v1::LoadModelResponse resp;
    return s->LoadModel(&ctx, r, &resp);
  };
  c["E33"] = [](Stub* s) {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest r;
    r.set_name("never_loaded");
    v1::UnloadModelResponse resp;
    return s->UnloadModel(&ctx, r, &resp);
  };
  c["E39"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.clear_shape();
    t.add_shape(63);
    t.add_shape(int64_t{8863084066665136127});
    t.add_shape(2);
    return Predict(s, r);
  };
  c["E35"] = [](Stub* s) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest r;
    r.set_name(std::string("waveform_lstm\0x", 15));
    v1::LoadModelResponse resp;
    return s->LoadModel(&ctx, r, &resp);
  };
  c["E36"] = [](Stub* s) {
    auto r = Good();
    r.mutable_model_spec()->set_name(std::string(10240, 'm'));
    return Predict(s, r);
  };
  c["E37"] = [](Stub* s) {
    auto r = Good();
    v1::Tensor& t = (*r.mutable_inputs())["waveform"];
    t.clear_shape();
    for (int i = 0; i < 10000; ++i) t.add_shape(1);
    t.clear_float_val();
    t.add_float_val(0.5f);
    return Predict(s, r);
  };
  // Bytes that are no protobuf message: a field 1 of wire type 7, which does not exist.
  c["E40"] = [](Stub*) { return RawCall("/rnnserve.v1.RnnServe/Predict", "\x0f\xff\xfe garbage"); };
  c["E41"] = [](Stub*) {
    return RawCall("/inference.GRPCInferenceService/ModelInfer", "\x0f\xff\xfe garbage");
  };
  c["E42"] = [](Stub*) {
    return RawCall("/tensorflow.serving.PredictionService/Predict", "\x0f\xff\xfe garbage");
  };
  c["E34"] = [](Stub* s) {
    grpc::ClientContext ctx;
    v1::ModelMetadataRequest r;
    r.mutable_model_spec()->set_name("no_such_model");
    v1::ModelMetadataResponse resp;
    return s->ModelMetadata(&ctx, r, &resp);
  };
  return c;
}

TEST(Errors, EveryDocumentedBadRequestGetsItsCodeAndMessageAndTheServerKeepsServing) {
  const fs::path repo = fs::temp_directory_path() / ("rnnserve_errors_" + std::to_string(getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo);
  fs::copy(SourcePath("models/examples/waveform_lstm"), repo / "waveform_lstm",
           fs::copy_options::recursive);
  fs::copy(SourcePath("models/examples/waveform_lstm"), repo / "strict",
           fs::copy_options::recursive);
  std::ofstream(repo / "strict" / "config.pbtxt")
      << "input { name: \"waveform\" reject_non_finite: true }\n";
  fs::create_directories(repo / "broken" / "1");
  std::ofstream(repo / "broken" / "1" / "model.h5") << "not a model";
  auto server = ServerProcess::Start(
      repo.string(), {"--max-message-bytes", "4194304", "--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  RawChannel() = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());

  const std::vector<DocRow> rows = ReadDoc();
  auto cases = Cases();
  EXPECT_GE(rows.size(), 25u);
  EXPECT_EQ(rows.size(), cases.size()) << "docs/errors.md and this test list different cases";
  for (const DocRow& row : rows) {
    ASSERT_EQ(cases.count(row.id), 1u) << row.id << " has no request in this test";
    const grpc::Status s = cases[row.id](stub.get());
    grpc::StatusCode want;
    static const std::map<std::string, grpc::StatusCode> kCodes = {
        {"INVALID_ARGUMENT", grpc::StatusCode::INVALID_ARGUMENT},
        {"NOT_FOUND", grpc::StatusCode::NOT_FOUND},
        {"UNAVAILABLE", grpc::StatusCode::UNAVAILABLE},
        {"RESOURCE_EXHAUSTED", grpc::StatusCode::RESOURCE_EXHAUSTED},
        {"DEADLINE_EXCEEDED", grpc::StatusCode::DEADLINE_EXCEEDED},
        {"FAILED_PRECONDITION", grpc::StatusCode::FAILED_PRECONDITION},
        {"ABORTED", grpc::StatusCode::ABORTED}};
    ASSERT_EQ(kCodes.count(row.code), 1u) << row.id << ": unknown code " << row.code;
    want = kCodes.at(row.code);
    EXPECT_EQ(s.error_code(), want) << row.id << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(row.excerpt), std::string::npos)
        << row.id << ": message '" << s.error_message() << "' lacks '" << row.excerpt << "'";
    ASSERT_TRUE((*server)->Alive()) << "server died on " << row.id;
  }
  // After all of them, a good request is answered with Keras's numbers.
  client::RnnServeClient c({.server = (*server)->address()});
  auto resp = c.Predict("waveform_lstm", {{"", LoadNpy("tests/fixtures/example/input.npy")}}, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(AllClose(
      engine::Tensor::Float(
          {3, 3}, std::vector<float>(resp->outputs().at("probabilities").float_val().begin(),
                                     resp->outputs().at("probabilities").float_val().end())),
      LoadNpy("tests/fixtures/example/expected.npy")));
  server->reset();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace rnnserve::testing
