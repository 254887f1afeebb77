// Fair shares of the server's bounds under a real flood on loopback (server/limits/fair_share.h,
// docs/security.md "Bounded resources"): a caller that floods a model without dynamic batching
// does not lock a polite caller out; Evaluate counts against the byte budget as Predict does; one
// caller cannot hold every stream; a stream whose client never reads is closed after the idle
// limit and its sequence released; the connections of one host share one sequence quota; a
// polite caller's request is served ahead of a flood's queued requests (callers take turns).
// Callers are told apart by their tokens (the server takes a token's hash as the caller even
// without --auth-token-file), connections of one host without a token are one caller. Every
// test is bounded in requests and in time; none asserts a speed.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<v1::StreamPredictRequest, v1::StreamPredictResponse>;

// A channel on a connection of its own (another peer to the server, the same host).
std::shared_ptr<grpc::Channel> NewConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// [rows, steps, 2] waveforms for waveform_lstm (no dynamic batching: each request runs alone).
v1::Tensor Waveform(int64_t rows, int64_t steps) {
  v1::Tensor t;
  t.set_dtype(v1::TYPE_FP32);
  for (int64_t d : {rows, steps, int64_t{2}}) t.add_shape(d);
  for (int64_t i = 0; i < rows * steps * 2; ++i) t.add_float_val(std::sin(0.01f * i));
  return t;
}

v1::PredictRequest PredictOf(int64_t steps) {
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name("waveform_lstm");
  (*req.mutable_inputs())["waveform"] = Waveform(1, steps);
  return req;
}

void AsCaller(grpc::ClientContext* ctx, const std::string& token) {
  ctx->AddMetadata("authorization", "Bearer " + token);
}

class FairAdmissionTest : public ServerSuite<> {
 protected:
  // The defaults: 8 requests at once on the model (one instance), a 1 GiB budget, floors of 6%.
  static void SetUpTestSuite() { StartServer(SourcePath("models/examples")); }
};

TEST_F(FairAdmissionTest, PoliteCallerIsServedBesideAFloodingCallerOfSixteenThreads) {
  auto stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  const v1::PredictRequest flood_request = PredictOf(4000);
  std::atomic<bool> stop{false};
  std::atomic<int> flood_ok{0}, flood_exhausted{0}, flood_other{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < 16; ++i) {
    flood.emplace_back([&] {
      auto own = v1::RnnServe::NewStub(NewConnection(server()->address()));
      while (!stop) {
        grpc::ClientContext ctx;
        AsCaller(&ctx, "flood");
        v1::PredictResponse resp;
        const grpc::Status s = own->Predict(&ctx, flood_request, &resp);
        (s.ok()                                                   ? flood_ok
         : s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? flood_exhausted
                                                                  : flood_other)++;
      }
    });
  }
  // The flood holds the model before the polite caller comes.
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (flood_ok + flood_exhausted < 32 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  constexpr int kPolite = 100;
  int polite_ok = 0;
  std::string last_error;
  for (int i = 0; i < kPolite; ++i) {
    grpc::ClientContext ctx;
    AsCaller(&ctx, "polite");
    v1::PredictResponse resp;
    const grpc::Status s = stub->Predict(&ctx, PredictOf(10), &resp);
    polite_ok += s.ok();
    if (!s.ok()) last_error = s.error_message();
  }
  stop = true;
  for (auto& t : flood) t.join();
  RecordProperty("polite_ok", polite_ok);
  RecordProperty("flood_ok", flood_ok.load());
  RecordProperty("flood_refused", flood_exhausted.load());
  EXPECT_GE(polite_ok, kPolite * 99 / 100) << "last refusal: " << last_error;
  EXPECT_GT(flood_ok, 0);
  EXPECT_EQ(flood_other, 0);
}

TEST_F(FairAdmissionTest, PoliteRequestIsServedAheadOfTheFloodsQueuedRequests) {
  // The flood keeps about 7 requests admitted on the model's one instance: one runs, the rest
  // wait. A polite request waits for the running one, not behind the flood's waiting ones
  // (server/batching/fair_queue.h): the flood's answers that arrive while a polite request is
  // out count that, with one more for an answer already on its way.
  const v1::PredictRequest flood_request = PredictOf(4000);
  std::atomic<bool> stop{false};
  std::atomic<int> flood_ok{0}, flood_other{0};
  std::mutex other_mu;
  std::string other_error;  // the first answer neither OK, RESOURCE_EXHAUSTED nor UNAVAILABLE
  std::vector<std::thread> flood;
  for (int i = 0; i < 16; ++i) {
    flood.emplace_back([&] {
      auto own = v1::RnnServe::NewStub(NewConnection(server()->address()));
      while (!stop) {
        grpc::ClientContext ctx;
        AsCaller(&ctx, "flood-queue");
        v1::PredictResponse resp;
        const grpc::Status s = own->Predict(&ctx, flood_request, &resp);
        if (s.ok()) {
          ++flood_ok;
        } else if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
                   s.error_code() != grpc::StatusCode::UNAVAILABLE) {
          if (flood_other++ == 0) {
            std::lock_guard<std::mutex> lock(other_mu);
            other_error = absl::StrCat(s.error_code(), ": ", s.error_message());
          }
        } else {
          // Refused, or (a flood's own connection, on a loaded machine) not connected: again.
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    });
  }
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (flood_ok < 16 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  constexpr int kPolite = 20;
  int polite_ok = 0, flood_during_polite = 0;
  for (int i = 0; i < kPolite; ++i) {
    grpc::ClientContext ctx;
    AsCaller(&ctx, "polite-queue");
    v1::PredictResponse resp;
    const int before = flood_ok;
    const grpc::Status s = stub->Predict(&ctx, PredictOf(10), &resp);
    flood_during_polite += flood_ok - before;
    polite_ok += s.ok();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  stop = true;
  for (auto& t : flood) t.join();
  RecordProperty("flood_answers_during_polite", flood_during_polite);
  RecordProperty("flood_ok", flood_ok.load());
  EXPECT_EQ(polite_ok, kPolite);
  EXPECT_GE(flood_ok, 16);
  EXPECT_EQ(flood_other, 0) << other_error;
  // First come, first served, each polite request would wait for the ~6 waiting before it.
  EXPECT_LE(flood_during_polite, 2 * kPolite);
}

v1::EvaluateRequest EvaluateOf(int64_t rows, int64_t steps) {
  v1::EvaluateRequest req;
  req.mutable_model_spec()->set_name("waveform_lstm");
  (*req.mutable_inputs())["waveform"] = Waveform(rows, steps);
  v1::Tensor& y = (*req.mutable_targets())["probabilities"];
  y.set_dtype(v1::TYPE_FP32);
  y.add_shape(rows);
  for (int64_t r = 0; r < rows; ++r) y.add_float_val(static_cast<float>(r % 3));  // class ids
  req.set_loss("sparse_categorical_crossentropy");
  return req;
}

class EvaluateBudgetTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    StartServer(SourcePath("models/examples"), {"--max-inflight-bytes=300000000"});
  }
};

TEST_F(EvaluateBudgetTest, ConcurrentLargeEvaluatesAreRefusedBeyondTheByteBudget) {
  // 120 Evaluates at once of 64 x 1000 steps (512 kB of inputs each, and the engine's working
  // memory for 64,000 positions): a few fit in the 300 MB budget, the rest are refused.
  const v1::EvaluateRequest req = EvaluateOf(64, 1000);
  auto stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  std::atomic<int> ok{0}, exhausted{0}, named{0}, other{0};
  std::latch go(120);
  std::vector<std::thread> pool;
  for (int i = 0; i < 120; ++i) {
    pool.emplace_back([&] {
      grpc::ClientContext ctx;
      v1::EvaluateResponse resp;
      go.arrive_and_wait();
      const grpc::Status s = stub->Evaluate(&ctx, req, &resp);
      if (s.ok()) {
        ++ok;
      } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++exhausted;
        named += s.error_message().find("--max-inflight-bytes=300000000") != std::string::npos;
      } else {
        ++other;
        ADD_FAILURE() << s.error_message();
      }
    });
  }
  for (auto& t : pool) t.join();
  RecordProperty("evaluate_ok", ok.load());
  RecordProperty("evaluate_refused", exhausted.load());
  EXPECT_GE(ok, 1);
  EXPECT_GE(exhausted, 60);
  EXPECT_EQ(named, exhausted);
  EXPECT_EQ(ok + exhausted, 120);
}

TEST_F(EvaluateBudgetTest, EvaluateStreamChunkOverTheBudgetIsRefusedNamingIt) {
  auto stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  grpc::ClientContext ctx;
  v1::EvaluateResponse resp;
  auto writer = stub->EvaluateStream(&ctx, &resp);
  writer->Write(EvaluateOf(4, 10));
  writer->Write(EvaluateOf(400, 1000));  // its working memory alone is past 300 MB
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("chunk 1: request memory budget exceeded"), std::string::npos)
      << s.error_message();
}

v1::StreamPredictRequest Chunk(uint64_t id, bool start, bool end = false, int64_t steps = 5) {
  v1::StreamPredictRequest req;
  req.mutable_model_spec()->set_name("waveform_lstm");
  req.set_sequence_id(id);
  req.set_start(start);
  req.set_end(end);
  (*req.mutable_inputs())["waveform"] = Waveform(1, steps);
  return req;
}

// Sends one chunk and returns its answer's error_code (0: OK); -1 when the stream broke.
int Send(Stream* stream, const v1::StreamPredictRequest& req, std::string* message = nullptr) {
  if (!stream->Write(req)) return -1;
  v1::StreamPredictResponse resp;
  if (!stream->Read(&resp)) return -1;
  if (message != nullptr) *message = resp.error_message();
  return resp.error_code();
}

struct OpenStream {
  OpenStream(v1::RnnServe::Stub* stub, const std::string& token = "") {
    if (!token.empty()) AsCaller(&ctx, token);
    stream = stub->StreamPredict(&ctx);
  }
  grpc::Status Close() {
    stream->WritesDone();
    return stream->Finish();
  }
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
};

constexpr int kResourceExhausted = 8;

class FairStreamsTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    // 16 streams: a floor of one each, and one kept for newcomers.
    StartServer(SourcePath("models/examples"),
                {"--max-streams=16", "--stream-idle-seconds=3", "--max-sequences-per-client=3"});
  }
};

TEST_F(FairStreamsTest, OneCallerOnManyConnectionsCannotHoldEveryStream) {
  std::vector<std::unique_ptr<v1::RnnServe::Stub>> stubs;
  std::vector<std::unique_ptr<OpenStream>> greedy;
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    stubs.push_back(v1::RnnServe::NewStub(NewConnection(server()->address())));
    greedy.push_back(std::make_unique<OpenStream>(stubs.back().get()));
    // A stream is admitted once the server runs its handler: a chunk says which.
    if (Send(greedy.back()->stream.get(), Chunk(100 + i, true, true)) != 0) {
      EXPECT_EQ(greedy.back()->stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      greedy.pop_back();
      ++refused;
    }
  }
  EXPECT_EQ(greedy.size(), 15u);
  EXPECT_EQ(refused, 5);
  auto other_stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  OpenStream other(other_stub.get(), "other");
  EXPECT_EQ(Send(other.stream.get(), Chunk(200, true, true)), 0);
  EXPECT_TRUE(other.Close().ok());
  for (auto& g : greedy) EXPECT_TRUE(g->Close().ok());
}

TEST_F(FairStreamsTest, ConnectionsOfOneHostShareOneSequenceQuota) {
  // Three connections without a token, one stream each, starting sequences until refused.
  std::vector<std::unique_ptr<v1::RnnServe::Stub>> stubs;
  std::vector<std::unique_ptr<OpenStream>> streams;
  int live = 0;
  std::string message;
  for (int c = 0; c < 3; ++c) {
    stubs.push_back(v1::RnnServe::NewStub(NewConnection(server()->address())));
    streams.push_back(std::make_unique<OpenStream>(stubs.back().get()));
    for (uint64_t id = 0; id < 3; ++id) {
      const int code = Send(streams.back()->stream.get(), Chunk(300 + 10 * c + id, true), &message);
      live += code == 0;
      if (code != 0) {
        EXPECT_EQ(code, kResourceExhausted) << message;
      }
    }
  }
  EXPECT_EQ(live, 3);  // the quota of one client (--max-sequences-per-client=3), not 3 x 3
  EXPECT_NE(message.find("the per-client limit (--max-sequences-per-client=3)"), std::string::npos)
      << message;
  // KServe's sequences count against the same client's quota, from any connection.
  auto kserve = inference::GRPCInferenceService::NewStub(NewConnection(server()->address()));
  inference::ModelInferRequest req;
  req.set_model_name("waveform_lstm");
  auto* in = req.add_inputs();
  in->set_name("waveform");
  in->set_datatype("FP32");
  for (int64_t d : {1, 5, 2}) in->add_shape(d);
  for (int i = 0; i < 10; ++i) in->mutable_contents()->add_fp32_contents(0.1f * i);
  (*req.mutable_parameters())["sequence_id"].set_int64_param(399);
  (*req.mutable_parameters())["sequence_start"].set_bool_param(true);
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  EXPECT_EQ(kserve->ModelInfer(&kctx, req, &kresp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (auto& s : streams) EXPECT_TRUE(s->Close().ok());
}

TEST_F(FairStreamsTest, StreamWhoseClientNeverReadsIsClosedAfterTheIdleLimit) {
  // A client that takes little before it reads: no BDP probing, small read-ahead.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateCustomChannel(server()->address(), grpc::InsecureChannelCredentials(), args));
  OpenStream deaf(stub.get(), "deaf");
  // Chunks of sequence 500 whose answers the client never reads: once gRPC's flow-control
  // windows are full the server's Write waits, and the stream's next Read with it. A writer of
  // its own, since the client's writes stop too once the server stops reading.
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < 20000; ++i) {
      if (!deaf.stream->Write(Chunk(500, i == 0))) return;
      ++written;
    }
  });
  // The sequence is released when the server closes the stream: a stream of the same caller
  // may then start sequence 500 itself (until then it belongs to the deaf stream).
  auto other = v1::RnnServe::NewStub(NewConnection(server()->address()));
  bool released = false;
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (!released && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    OpenStream probe(other.get(), "deaf");
    released = Send(probe.stream.get(), Chunk(500, true, true)) == 0;
    probe.Close();
  }
  EXPECT_TRUE(released) << written << " chunks written; the stream still holds sequence 500";
  if (!released) deaf.ctx.TryCancel();
  writer.join();
  // The answers the server wrote before it closed the stream, then its status.
  v1::StreamPredictResponse resp;
  int answered = 0;
  while (deaf.stream->Read(&resp)) ++answered;
  EXPECT_LT(answered, written);
  EXPECT_EQ(deaf.stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  RecordProperty("chunks_written", written.load());
}

}  // namespace
}  // namespace rnnserve::testing
