// Scale-out through a real proxy: HAProxy (Debian's) hashing x-sequence-id over three
// rnnserve replicas that share one redis-server. Skips, naming the reason, without redis-server
// or haproxy.

#include <thread>

#include "tests/integration/scale_out_fixture.h"

namespace rnnserve::testing {
namespace {

// HAProxy (Debian's) in front of the two replicas, hashing x-sequence-id as
// deploy/haproxy/haproxy.cfg does; skipped, naming the reason, without the binary.
class ScaleOutProxyTest : public ScaleOutTest {
 protected:
  void SetUp() override {
    ScaleOutTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (access(kHaproxy, X_OK) != 0) {
      GTEST_SKIP() << kHaproxy << " is not installed (deploy/install_deps.sh installs haproxy)";
    }
    auto c = ServerProcess::Start(repo_, flags_, {.token = kAlice});
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
    port_ = FreeLoopbackPort();
    std::ofstream(dir_ + "/haproxy.cfg")
        << "global\n  maxconn 256\n"
        << "defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n"
        << "  timeout server 30s\n  option redispatch\n  retries 3\n  retry-on conn-failure\n"
        << "frontend grpc\n  bind 127.0.0.1:" << port_ << " proto h2\n"
        << "  default_backend rnnserve\n"
        << "backend rnnserve\n  balance hdr(x-sequence-id)\n  hash-type consistent\n"
        << "  server a " << a_->address() << " proto h2 check inter 500ms fall 1\n"
        << "  server b " << b_->address() << " proto h2 check inter 500ms fall 1\n"
        << "  server c " << c_->address() << " proto h2 check inter 500ms fall 1\n";
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string cfg = dir_ + "/haproxy.cfg";
      execl(kHaproxy, kHaproxy, "-db", "-q", "-f", cfg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Ready once a sequence runs through it.
    ModelInferResponse resp;
    grpc::Status s;
    for (int i = 0; i < 200; ++i) {
      s = Chunk(address(), kAlice, 1, 0, 0, 40, true, true, &resp);
      if (s.ok()) break;
      usleep(50 * 1000);
    }
    ASSERT_TRUE(s.ok()) << "haproxy on " << address() << ": " << s.error_message();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    c_.reset();
    ScaleOutTest::TearDown();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Steps [from, to) of every one of kSequences sequences (the fixture's rows in turn) through
  // the proxy, one client thread a sequence; a sequence's first failure lands in failures_.
  static constexpr int kSequences = 48;
  void Round(int64_t from, int64_t to) {
    const std::vector<int64_t> lengths = {40, 25, 12};
    std::vector<std::thread> threads;
    for (int k = 0; k < kSequences; ++k) {
      threads.emplace_back([&, k] {
        const int b = k % 3;
        for (int64_t t0 = from; t0 < std::min(to, lengths[b]) && failures_[k].empty(); t0 += 6) {
          const int64_t t1 = std::min(t0 + 6, lengths[b]);
          // A stream the proxy refused (HTTP/2 REFUSED_STREAM: it reached no replica) is
          // resent, as gRPC's retry policy does for UNAVAILABLE; one a replica ran never is.
          // (Until HAProxy's check takes the replica out: at most a few seconds.) So is a
          // chunk of a sequence another replica holds and has not handed over yet
          // (--sequence-durability=drain: UNAVAILABLE, nothing ran).
          grpc::Status s;
          for (int attempt = 0; attempt < 100; ++attempt) {
            s = Chunk(address(), kAlice, 500 + k, b, t0, t1, t0 == 0, t1 == lengths[b], &last_[k]);
            if (s.error_message().find("RST_STREAM with error code 7") == std::string::npos &&
                s.error_message().find("not handed over yet") == std::string::npos) {
              break;
            }
            usleep(100 * 1000);
          }
          if (!s.ok()) failures_[k] = "steps " + std::to_string(t0) + ": " + s.error_message();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  void ExpectAllEqualKeras() {
    for (int k = 0; k < kSequences; ++k) {
      ASSERT_TRUE(failures_[k].empty()) << "sequence " << k << ": " << failures_[k];
      ExpectKeras(last_[k], k % 3);
    }
  }

  static constexpr char kHaproxy[] = "/usr/sbin/haproxy";
  std::unique_ptr<ServerProcess> c_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::vector<ModelInferResponse> last_ = std::vector<ModelInferResponse>(kSequences);
  std::vector<std::string> failures_ = std::vector<std::string>(kSequences);
};

// 48 sequences stream concurrently through the proxy, spread over three replicas by the hash
// of their ids. Between rounds of chunks, replica A is killed (SIGKILL) and then replica B is
// stopped (SIGTERM, drained): every sequence finishes on the replicas left, from Redis where it
// had to move, and equals Keras on the whole sequence.
TEST_F(ScaleOutProxyTest, ConcurrentSequencesThroughHaproxySurviveAKillAndAStop) {
  Round(0, 12);
  ASSERT_EQ(kill(a_->pid(), SIGKILL), 0);
  Round(12, 24);
  b_->Stop();
  Round(24, 40);
  ExpectAllEqualKeras();
}

// The same with --sequence-durability=drain (and 2 s of drain): replica B is stopped with
// SIGTERM while a round of chunks is in flight. It hands the sequences it holds over to Redis
// at once and writes the chunks it still serves while draining; every sequence finishes on the
// replicas left and equals Keras on the whole sequence; none is lost.
class ScaleOutProxyDrainTest : public ScaleOutProxyTest {
 protected:
  std::vector<std::string> ExtraFlags() const override {
    return {"--sequence-durability", "drain", "--drain-seconds", "2"};
  }
};

TEST_F(ScaleOutProxyDrainTest, ConcurrentSequencesThroughHaproxySurviveAStopWhileStreaming) {
  Round(0, 12);
  std::thread streaming([this] { Round(12, 24); });
  b_->Terminate();
  streaming.join();
  ASSERT_EQ(b_->Stop(), 0);
  Round(24, 40);
  ExpectAllEqualKeras();
  EXPECT_EQ(Counter(a_metrics_, "rnnserve_sequences_lost_total"), 0);
}

}  // namespace
}  // namespace rnnserve::testing
