// Bounded resources against the real server (docs/security.md "Bounded resources"): the
// request byte budget and the per-model concurrency cap of an unbatched model, the stream cap,
// the gRPC thread cap, idle stream close, sequence ownership on both APIs and the per-client
// sequence quota.

#include <dirent.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <latch>
#include <thread>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using Stream = grpc::ClientReaderWriter<v1::StreamPredictRequest, v1::StreamPredictResponse>;

// A channel on a connection of its own (another peer to the server).
std::shared_ptr<grpc::Channel> NewConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// A [1, steps, 2] waveform for waveform_lstm (no dynamic batching: each request runs alone).
v1::Tensor Waveform(int64_t steps) {
  v1::Tensor t;
  t.set_dtype(v1::TYPE_FP32);
  t.add_shape(1);
  t.add_shape(steps);
  t.add_shape(2);
  for (int64_t i = 0; i < steps * 2; ++i) t.add_float_val(std::sin(0.01f * i));
  return t;
}

v1::PredictRequest PredictOf(int64_t steps) {
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name("waveform_lstm");
  (*req.mutable_inputs())["waveform"] = Waveform(steps);
  return req;
}

int Tasks(pid_t pid) {
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

// The process's threads named `name` (gRPC names its threads, cut to 15 characters).
int TasksNamed(pid_t pid, const std::string& name) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(task.c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(task + "/" + e->d_name + "/comm");
    std::string line;
    n += std::getline(comm, line) && line == name;
  }
  closedir(dir);
  return n;
}

// The server under test is built as this test is (tests/run_sanitizers.sh builds both). Under
// AddressSanitizer freed memory stays in its quarantine (256 MB); under ThreadSanitizer every
// byte the server touches also costs shadow memory, several times its size. In either, RSS says
// nothing about what the server holds.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerOwnsRss = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerOwnsRss = true;
#else
constexpr bool kSanitizerOwnsRss = false;
#endif
#else
constexpr bool kSanitizerOwnsRss = false;
#endif

int64_t RssKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t kb = -1;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kb;
      break;
    }
  }
  return kb;
}

struct Outcome {
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  std::atomic<int> named{0};  // exhausted, naming the expected flag
};

// `threads` requests of `steps` steps at once; counts how they ended.
void Burst(v1::RnnServe::Stub* stub, int threads, int64_t steps, const std::string& flag,
           Outcome* out) {
  const v1::PredictRequest req = PredictOf(steps);
  std::latch go(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      grpc::ClientContext ctx;
      v1::PredictResponse resp;
      go.arrive_and_wait();
      const grpc::Status s = stub->Predict(&ctx, req, &resp);
      if (s.ok()) {
        ++out->ok;
      } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++out->exhausted;
        if (s.error_message().find(flag) != std::string::npos) ++out->named;
      } else {
        ++out->other;
        ADD_FAILURE() << s.error_message();
      }
    });
  }
  for (auto& t : pool) t.join();
}

class RequestLimitsTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    StartServer(SourcePath("models/examples"),
                {"--max-inflight-bytes=60000000", "--max-concurrent-per-model=3"});
  }
  void SetUp() override {
    ServerSuite::SetUp();
    stub_ = v1::RnnServe::NewStub(
        grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  }
  grpc::Status Predict(int64_t steps) {
    grpc::ClientContext ctx;
    v1::PredictResponse resp;
    return stub_->Predict(&ctx, PredictOf(steps), &resp);
  }
  std::unique_ptr<v1::RnnServe::Stub> stub_;
};

TEST_F(RequestLimitsTest, RequestOverTheByteBudgetIsResourceExhaustedNamingIt) {
  // 300,000 steps: 2.4 MB serialized, 2.4 MB decoded and the engine's working memory for
  // 300,000 positions (limits/working_memory.h), over 60 MB.
  const grpc::Status s = Predict(300000);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("request memory budget exceeded: this request needs "),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("of the --max-inflight-bytes=60000000 budget are held by "
                                   "requests in flight"),
            std::string::npos)
      << s.error_message();
  EXPECT_TRUE(Predict(10).ok());
}

TEST_F(RequestLimitsTest, ConcurrentLargeRequestsAreRefusedOverBudgetWhileSmallOnesRun) {
  const int64_t rss_before = RssKb(server()->pid());
  std::atomic<int64_t> rss_peak{rss_before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      rss_peak = std::max<int64_t>(rss_peak, RssKb(server()->pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Each 40,000-step request holds its 640 kB and the engine's working memory for 40,000
  // positions, most of the 60 MB budget: one runs at a time.
  // On a loaded machine one burst's requests may reach the server one after another, none
  // overlapping; a burst is repeated (at most 5 times) until one is refused.
  Outcome large;
  int bursts = 0;
  std::thread burst([&] {
    do {
      Burst(stub_.get(), 32, 40000, "--max-inflight-bytes", &large);
    } while (++bursts < 5 && large.named == 0);
  });
  int small_ok = 0;
  for (int i = 0; i < 20; ++i) small_ok += Predict(10).ok();
  burst.join();
  done = true;
  sampler.join();
  EXPECT_EQ(small_ok, 20);
  EXPECT_GE(large.ok, 1);
  EXPECT_GE(large.named, 1);
  EXPECT_EQ(large.ok + large.exhausted, 32 * bursts);
  // What grows is one request's engine scratch ([T, B, 4H] gates, ~128x its input) and gRPC's
  // buffers; without the budget every waiting request also holds its decoded copy. Not under a
  // sanitizer, whose quarantine or shadow memory is most of the RSS (kSanitizerOwnsRss).
  if (!kSanitizerOwnsRss) {
    EXPECT_LT(rss_peak - rss_before, 100 * 1024)
        << "RSS " << rss_before << " -> " << rss_peak << " kB";
  }
  RecordProperty("rss_before_kb", static_cast<int>(rss_before));
  RecordProperty("rss_peak_kb", static_cast<int>(rss_peak.load()));
  RecordProperty("large_ok", large.ok.load());
  RecordProperty("large_refused", large.exhausted.load());
  EXPECT_TRUE(Predict(10).ok());
}

TEST_F(RequestLimitsTest, ConcurrencyOverTheCapOfAnUnbatchedModelIsResourceExhausted) {
  // 8,000 steps: a fifth of the budget each, so the 3-request cap binds before the budget. One
  // caller alone may hold 2 of the 3 (the third is kept for a new caller: fair_share.h).
  Outcome out;
  Burst(stub_.get(), 16, 8000, "its limit without dynamic batching (--max-concurrent-per-model=3)",
        &out);
  EXPECT_GE(out.ok, 2);
  EXPECT_GE(out.named, 1);
  EXPECT_EQ(out.ok + out.exhausted, 16);
  EXPECT_TRUE(Predict(10).ok());
}

v1::StreamPredictRequest Chunk(uint64_t id, bool start, bool end = false) {
  v1::StreamPredictRequest req;
  req.mutable_model_spec()->set_name("waveform_lstm");
  req.set_sequence_id(id);
  req.set_start(start);
  req.set_end(end);
  (*req.mutable_inputs())["waveform"] = Waveform(5);
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

constexpr int kInvalidArgument = 3, kAlreadyExists = 6, kResourceExhausted = 8;

struct OpenStream {
  // `token`: the caller's (another caller than this host's streams without one).
  explicit OpenStream(v1::RnnServe::Stub* stub, const std::string& token = "") {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    stream = stub->StreamPredict(&ctx);
  }
  grpc::Status Close() {
    stream->WritesDone();
    return stream->Finish();
  }
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
};

class StreamLimitsTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    StartServer(SourcePath("models/examples"),
                {"--max-streams=4", "--stream-idle-seconds=3", "--grpc-max-threads=24",
                 "--grpc-min-pollers=1", "--grpc-max-pollers=4", "--max-sequences-per-client=3"});
  }
  void SetUp() override {
    ServerSuite::SetUp();
    stub_ = v1::RnnServe::NewStub(NewConnection(server()->address()));
  }
  std::unique_ptr<v1::RnnServe::Stub> stub_;
};

TEST_F(StreamLimitsTest, StreamOverTheCapIsResourceExhaustedNamingIt) {
  // One caller may hold 3 of the 4 (the last is kept for a new caller: fair_share.h); another
  // caller takes the 4th.
  std::vector<std::unique_ptr<OpenStream>> open;
  for (int i = 0; i < 4; ++i) {
    open.push_back(std::make_unique<OpenStream>(stub_.get(), i == 3 ? "other" : ""));
    ASSERT_EQ(Send(open.back()->stream.get(), Chunk(100 + i, true, true)), 0);
  }
  OpenStream extra(stub_.get());
  extra.stream->Write(Chunk(200, true));
  v1::StreamPredictResponse resp;
  EXPECT_FALSE(extra.stream->Read(&resp));
  const grpc::Status s = extra.stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find(
                "streams open (StreamPredict and ModelStreamInfer), its limit (--max-streams=4)"),
            std::string::npos)
      << s.error_message();
  // KServe's streaming calls count against the same cap.
  auto kserve = inference::GRPCInferenceService::NewStub(NewConnection(server()->address()));
  grpc::ClientContext kctx;
  auto kstream = kserve->ModelStreamInfer(&kctx);
  kstream->WritesDone();
  EXPECT_EQ(kstream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (auto& o : open) EXPECT_TRUE(o->Close().ok());
}

TEST_F(StreamLimitsTest, ThreadCountStaysBoundedWithAThousandStreamsAttempted) {
  const pid_t pid = server()->pid();
  const int before = Tasks(pid);
  // 20 connections x 50 streams, all opened before any is closed.
  std::vector<std::unique_ptr<v1::RnnServe::Stub>> stubs;
  for (int c = 0; c < 20; ++c) {
    stubs.push_back(v1::RnnServe::NewStub(NewConnection(server()->address())));
  }
  std::vector<std::unique_ptr<OpenStream>> streams;
  int most = before;
  int most_server_threads = 0;  // gRPC's sync server threads, the ones the flag caps
  auto sample = [&] {
    most = std::max(most, Tasks(pid));
    most_server_threads = std::max(most_server_threads, TasksNamed(pid, "grpcpp_sync_ser"));
  };
  for (int i = 0; i < 1000; ++i) {
    streams.push_back(std::make_unique<OpenStream>(stubs[i % 20].get()));
    if (i % 50 == 0) sample();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  sample();
  int ok = 0, exhausted = 0;
  for (auto& s : streams) {
    const grpc::Status st = s->Close();
    ok += st.ok();
    exhausted += st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_LE(ok, 4);
  EXPECT_EQ(ok + exhausted, 1000);
  // gRPC's server threads are capped at 24 (--grpc-max-threads), whatever the clients do.
  // Besides them, gRPC core's executor grows from one thread to two per core while it is busy
  // (its own cap, which the flag does not set). Under ThreadSanitizer on two busy cores it did
  // (4 executor threads beside up to 21 server threads), and the total once reached 36 against
  // 11 before + 24.
  const int executor_growth = 2 * static_cast<int>(std::thread::hardware_concurrency()) - 1;
  EXPECT_LE(most_server_threads, 24) << "gRPC server threads at most";
  EXPECT_LE(most, before + 24 + executor_growth)
      << "threads: " << before << " before, " << most << " at most";
  RecordProperty("threads_before", before);
  RecordProperty("threads_most", most);
  RecordProperty("server_threads_most", most_server_threads);
  EXPECT_EQ(Send(OpenStream(stub_.get()).stream.get(), Chunk(300, true, true)), 0);
}

TEST_F(StreamLimitsTest, IdleStreamIsClosedAfterTheTimeoutAndItsSequenceEnds) {
  OpenStream idle(stub_.get());
  ASSERT_EQ(Send(idle.stream.get(), Chunk(400, true)), 0);
  const auto start = std::chrono::steady_clock::now();
  v1::StreamPredictResponse resp;
  EXPECT_FALSE(idle.stream->Read(&resp));  // blocks until the server closes the stream
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 2.9);
  EXPECT_LT(waited, 10);
  EXPECT_EQ(idle.stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  OpenStream next(stub_.get());
  EXPECT_EQ(Send(next.stream.get(), Chunk(400, false)), 3);  // INVALID_ARGUMENT: not live
  EXPECT_EQ(Send(next.stream.get(), Chunk(400, true, true)), 0);
  EXPECT_TRUE(next.Close().ok());
}

TEST_F(StreamLimitsTest, SequenceBelongsToItsStreamAndEndsWithIt) {
  OpenStream a(stub_.get()), b(stub_.get());
  ASSERT_EQ(Send(a.stream.get(), Chunk(600, true)), 0);
  std::string message;
  // To b, a's live id looks like one that is not live (as 601, which is not), and a start only
  // says it is in use.
  std::string never;
  EXPECT_EQ(Send(b.stream.get(), Chunk(601, false), &never), kInvalidArgument) << never;
  EXPECT_EQ(Send(b.stream.get(), Chunk(600, false), &message), kInvalidArgument) << message;
  EXPECT_EQ(message, absl::StrReplaceAll(never, {{"sequence 601 ", "sequence 600 "}}));
  EXPECT_EQ(Send(b.stream.get(), Chunk(600, true), &message), kAlreadyExists) << message;
  EXPECT_NE(message.find("is in use; start another id"), std::string::npos) << message;
  EXPECT_EQ(Send(a.stream.get(), Chunk(600, true), &message), kAlreadyExists) << message;
  EXPECT_NE(message.find("is live: end it (end=true) before starting it again"), std::string::npos)
      << message;
  EXPECT_EQ(Send(a.stream.get(), Chunk(600, false)), 0);  // the owner goes on
  EXPECT_TRUE(a.Close().ok());
  EXPECT_EQ(Send(b.stream.get(), Chunk(600, true, true)), 0);  // ended with its stream
  EXPECT_TRUE(b.Close().ok());
}

TEST_F(StreamLimitsTest, OneClientAtItsSequenceQuotaDoesNotLockOthersOut) {
  OpenStream greedy(stub_.get());
  for (uint64_t id = 700; id < 703; ++id) ASSERT_EQ(Send(greedy.stream.get(), Chunk(id, true)), 0);
  std::string message;
  EXPECT_EQ(Send(greedy.stream.get(), Chunk(703, true), &message), kResourceExhausted);
  EXPECT_NE(message.find("live sequences of model 'waveform_lstm', the per-client limit "
                         "(--max-sequences-per-client=3)"),
            std::string::npos)
      << message;
  // Another client (a token; another connection of this host is the same client).
  auto other_stub = v1::RnnServe::NewStub(NewConnection(server()->address()));
  OpenStream other(other_stub.get(), "other");
  EXPECT_EQ(Send(other.stream.get(), Chunk(704, true, true)), 0);
  EXPECT_TRUE(other.Close().ok());
  EXPECT_TRUE(greedy.Close().ok());
}

inference::ModelInferRequest KServeChunk(int64_t id, bool start, bool end) {
  inference::ModelInferRequest req;
  req.set_model_name("waveform_lstm");
  auto* in = req.add_inputs();
  in->set_name("waveform");
  in->set_datatype("FP32");
  for (int64_t d : {1, 5, 2}) in->add_shape(d);
  for (int i = 0; i < 10; ++i) in->mutable_contents()->add_fp32_contents(0.1f * i);
  (*req.mutable_parameters())["sequence_id"].set_int64_param(id);
  (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
  (*req.mutable_parameters())["sequence_end"].set_bool_param(end);
  return req;
}

grpc::StatusCode Infer(inference::GRPCInferenceService::Stub* stub,
                       const inference::ModelInferRequest& req, const std::string& token = "") {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  inference::ModelInferResponse resp;
  return stub->ModelInfer(&ctx, req, &resp).error_code();
}

TEST_F(StreamLimitsTest, KServeSequenceIsBoundToTheCallerThatStartedIt) {
  auto a = inference::GRPCInferenceService::NewStub(NewConnection(server()->address()));
  auto b = inference::GRPCInferenceService::NewStub(NewConnection(server()->address()));
  // No token: bound to the connection.
  ASSERT_EQ(Infer(a.get(), KServeChunk(800, true, false)), grpc::StatusCode::OK);
  // Another caller's live id answers as an id that is not live (docs/errors.md L09).
  EXPECT_EQ(Infer(b.get(), KServeChunk(800, false, false)), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Infer(a.get(), KServeChunk(800, true, false)), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Infer(a.get(), KServeChunk(800, false, true)), grpc::StatusCode::OK);
  // A token: bound to the token, from any connection.
  ASSERT_EQ(Infer(b.get(), KServeChunk(801, true, false), "t1"), grpc::StatusCode::OK);
  EXPECT_EQ(Infer(a.get(), KServeChunk(801, false, false), "t2"),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Infer(a.get(), KServeChunk(801, false, true), "t1"), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace rnnserve::testing
