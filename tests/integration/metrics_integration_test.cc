// rnnserve's /metrics endpoint, scraped by a real Prometheus server (Debian package
// prometheus) configured from deploy/prometheus/prometheus.yml and its rule files: the request
// counter Prometheus stores equals the requests sent, and quantiles of the latency histogram
// (queried directly and through the recording rules) are finite.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

struct HttpResponse {
  int status = 0;  // 0: no connection
  std::string body;
};

// A TCP connection to 127.0.0.1:port, or -1 when it is not established within 2 s; receives
// time out after 5 s, so a server that never answers fails a test instead of hanging it.
int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int error = 0;
  socklen_t len = sizeof(error);
  pollfd p{fd, POLLOUT, 0};
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
      (errno != EINPROGRESS || poll(&p, 1, 2000) != 1 ||
       getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0)) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// GET http://127.0.0.1:<port><target>, Connection: close.
HttpResponse HttpGet(int port, const std::string& target) {
  HttpResponse r;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return r;
  const std::string req =
      absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (!absl::StartsWith(raw, "HTTP/1.") || head_end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  r.body = raw.substr(head_end + 4);
  if (absl::StrContains(absl::AsciiStrToLower(raw.substr(0, head_end)),
                        "transfer-encoding: chunked")) {
    std::string body;  // de-chunk
    size_t pos = 0;
    while (pos < r.body.size()) {
      const size_t eol = r.body.find("\r\n", pos);
      if (eol == std::string::npos) break;
      const size_t len = std::strtoul(r.body.substr(pos, eol - pos).c_str(), nullptr, 16);
      if (len == 0) break;
      body += r.body.substr(eol + 2, len);
      pos = eol + 2 + len + 2;
    }
    r.body = body;
  }
  return r;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

bool HavePrometheus() { return std::system("command -v prometheus >/dev/null 2>&1") == 0; }

// A Prometheus server on a loopback port, with its data in a temporary directory; stopped and
// removed by the destructor.
class PrometheusProcess {
 public:
  // `config` is written to prometheus.yml in the data directory.
  static std::unique_ptr<PrometheusProcess> Start(const std::string& config, std::string* error) {
    char tmpl[] = "/tmp/rnnserve_prometheus_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      *error = "mkdtemp failed";
      return nullptr;
    }
    std::unique_ptr<PrometheusProcess> p(new PrometheusProcess(tmpl, FreeLoopbackPort()));
    std::ofstream(p->dir_ / "prometheus.yml") << config;
    std::vector<std::string> args = {
        "prometheus", absl::StrCat("--config.file=", (p->dir_ / "prometheus.yml").string()),
        absl::StrCat("--storage.tsdb.path=", (p->dir_ / "data").string()),
        absl::StrCat("--web.listen-address=127.0.0.1:", p->port_), "--log.level=warn"};
    const std::string log = (p->dir_ / "prometheus.log").string();
    p->pid_ = fork();
    if (p->pid_ == 0) {
      if (freopen(log.c_str(), "w", stdout) == nullptr || dup2(1, 2) < 0) _exit(126);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    // Ready within 30 s, or give up.
    for (int i = 0; i < 300; ++i) {
      if (HttpGet(p->port_, "/-/ready").status == 200) return p;
      int status;
      if (waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
        p->pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *error = "prometheus did not become ready: " + p->Log();
    return nullptr;
  }

  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) != pid_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (i == 99) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
        }
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Log() const {
    std::ifstream in(dir_ / "prometheus.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // An instant query; the first sample's value, or NaN when the result is empty.
  double Query(const std::string& promql) const {
    const HttpResponse r = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
    if (r.status != 200) return std::nan("");
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return std::nan("");
    const auto& result = j["data"]["result"];
    if (!result.is_array() || result.empty()) return std::nan("");
    return std::strtod(result[0]["value"][1].get<std::string>().c_str(), nullptr);
  }

  // Polls `promql` every 250 ms for up to `seconds` until `done(value)`; returns the last value.
  template <typename Pred>
  double QueryUntil(const std::string& promql, Pred done, int seconds = 30) const {
    double v = std::nan("");
    for (int i = 0; i < seconds * 4; ++i) {
      v = Query(promql);
      if (done(v)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return v;
  }

 private:
  PrometheusProcess(std::string dir, int port) : dir_(std::move(dir)), port_(port) {}
  const fs::path dir_;
  const int port_;
  pid_t pid_ = -1;
};

// deploy/prometheus/prometheus.yml pointed at `metrics_port`, scraping every second.
std::string PrometheusConfig(int metrics_port, std::string* error) {
  std::ifstream in(SourcePath("deploy/prometheus/prometheus.yml"));
  std::stringstream s;
  s << in.rdbuf();
  std::string config = s.str();
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"scrape_interval: 15s", "scrape_interval: 1s"},
      {"evaluation_interval: 15s", "evaluation_interval: 1s"},
      {"\"localhost:8502\"", absl::StrCat("\"127.0.0.1:", metrics_port, "\"")},
      {"- rules/", "- " + SourcePath("deploy/prometheus/rules") + "/"},
  };
  for (const auto& [from, to] : edits) {
    if (!absl::StrContains(config, from)) {
      *error = "deploy/prometheus/prometheus.yml no longer contains '" + from + "'";
      return "";
    }
    absl::StrReplaceAll({{from, to}}, &config);
  }
  return config;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_port_ = FreeLoopbackPort();
    auto s = ServerProcess::Start(SourcePath("models/examples"),
                                  {"--metrics-port", std::to_string(metrics_port_)});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  grpc::StatusCode Predict(int64_t B, int64_t T, int64_t F) {
    auto stub = v1::RnnServe::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    v1::PredictRequest req;
    req.mutable_model_spec()->set_name("waveform_lstm");
    v1::Tensor& t = (*req.mutable_inputs())["waveform"];
    t.set_dtype(v1::TYPE_FP32);
    t.add_shape(B);
    t.add_shape(T);
    t.add_shape(F);
    for (int64_t i = 0; i < B * T * F; ++i) t.add_float_val(0.01f * static_cast<float>(i % 7));
    grpc::ClientContext ctx;
    v1::PredictResponse resp;
    return stub->Predict(&ctx, req, &resp).error_code();
  }

  int metrics_port_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(MetricsServerTest, ModelSeriesExistAtZeroBeforeAnyRequest) {
  const HttpResponse r = HttpGet(metrics_port_, "/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* line : {
           "rnnserve_requests_total{code=\"OK\",method=\"Predict\",model=\"waveform_lstm\","
           "version=\"1\"} 0\n",
           "rnnserve_request_duration_seconds_count{method=\"Predict\",model=\"waveform_lstm\","
           "version=\"1\"} 0\n",
           "rnnserve_queue_duration_seconds_count{model=\"waveform_lstm\",version=\"1\"} 0\n",
           "rnnserve_compute_duration_seconds_count{engine=\"cpu\",model=\"waveform_lstm\","
           "version=\"1\"} 0\n",
           "rnnserve_batch_size_count{model=\"waveform_lstm\",version=\"1\"} 0\n",
           "rnnserve_model_loaded{model=\"waveform_lstm\",version=\"1\"} 1\n",
           "rnnserve_model_memory_bytes{engine=\"cpu\",model=\"waveform_lstm\",version=\"1\"} ",
           "process_resident_memory_bytes ",
       }) {
    EXPECT_TRUE(absl::StrContains(r.body, line)) << line << "\nin:\n" << r.body;
  }
}

TEST_F(MetricsServerTest, RequestsAreCountedByCodeWithBatchAndTimesteps) {
  ASSERT_EQ(Predict(3, 5, 2), grpc::StatusCode::OK);
  ASSERT_EQ(Predict(2, 5, 3), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string body = HttpGet(metrics_port_, "/metrics").body;
  for (const char* line : {
           "rnnserve_requests_total{code=\"OK\",method=\"Predict\",model=\"waveform_lstm\","
           "version=\"1\"} 1\n",
           "rnnserve_requests_total{code=\"INVALID_ARGUMENT\",method=\"Predict\","
           "model=\"waveform_lstm\",version=\"1\"} 1\n",
           "rnnserve_batch_size_bucket{model=\"waveform_lstm\",version=\"1\",le=\"4\"} 1\n",
           "rnnserve_batch_timesteps_computed_total{model=\"waveform_lstm\",version=\"1\"} 15\n",
           "rnnserve_inflight_requests{model=\"waveform_lstm\",version=\"1\"} 0\n",
           "rnnserve_queue_depth{model=\"waveform_lstm\",version=\"1\"} 0\n",
       }) {
    EXPECT_TRUE(absl::StrContains(body, line)) << line << "\nin:\n" << body;
  }
}

TEST_F(MetricsServerTest, UnknownModelIsCountedWithoutCreatingItsSeries) {
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name("no_such_model_42");
  grpc::ClientContext ctx;
  v1::PredictResponse resp;
  ASSERT_EQ(stub->Predict(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string body = HttpGet(metrics_port_, "/metrics").body;
  EXPECT_FALSE(absl::StrContains(body, "no_such_model_42"));
  EXPECT_TRUE(absl::StrContains(
      body,
      "rnnserve_requests_total{code=\"NOT_FOUND\",method=\"Predict\",model=\"\",version=\"\"} 1"))
      << body;
}

TEST_F(MetricsServerTest, UnloadRemovesTheModelsSeriesAndLoadBringsThemBack) {
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  const std::string loaded = "rnnserve_model_loaded{model=\"waveform_lstm\",version=\"1\"} ";
  {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name("waveform_lstm");
    v1::UnloadModelResponse resp;
    ASSERT_TRUE(stub->UnloadModel(&ctx, req, &resp).ok());
  }
  {
    const std::string body = HttpGet(metrics_port_, "/metrics").body;
    EXPECT_FALSE(absl::StrContains(body, "model=\"waveform_lstm\"")) << body;
  }
  {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name("waveform_lstm");
    v1::LoadModelResponse resp;
    ASSERT_TRUE(stub->LoadModel(&ctx, req, &resp).ok());
  }
  const std::string body = HttpGet(metrics_port_, "/metrics").body;
  EXPECT_TRUE(absl::StrContains(body, loaded + "1\n")) << body;
  // Management calls carry a bare name, not a model_spec: they count under model="".
  EXPECT_TRUE(absl::StrContains(
      body,
      "rnnserve_requests_total{code=\"OK\",method=\"UnloadModel\",model=\"\",version=\"\"} 1"))
      << body;
}

// 250 clients that connect to the metrics port and send nothing, and 100 that send their
// request one byte a second, do not hold back a scrape: it is answered within 3 s (within
// milliseconds in practice). (civetweb's thread-per-connection exposer, 16 workers each held
// up to 5 s by a silent connection, answers after ~80 s or not at all; this test then fails
// after 5 s, saying so.)
TEST_F(MetricsServerTest, IdleAndTricklingClientsDoNotDelayAScrape) {
  constexpr int kIdle = 250;
  constexpr int kTrickling = 100;
  std::vector<int> idle;
  std::vector<int> trickling;
  for (int i = 0; i < kIdle + kTrickling; ++i) {
    const int fd = ConnectLoopback(metrics_port_);
    ASSERT_GE(fd, 0) << "connection " << i << " to the metrics port was not accepted";
    (i < kIdle ? idle : trickling).push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickler([&trickling, &stop] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    for (size_t i = 0; i < request.size() && !stop; ++i) {
      for (int fd : trickling) send(fd, &request[i], 1, MSG_NOSIGNAL);
      for (int t = 0; t < 10 && !stop; ++t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  // Long enough for the server to have taken every connection, and the tricklers two bytes.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  for (int scrape = 0; scrape < 3; ++scrape) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResponse r = HttpGet(metrics_port_, "/metrics");  // gives up after 5 s
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.status, 200) << "no answer to GET /metrics (scrape " << scrape << ") after "
                             << seconds << " s while " << kIdle << " idle clients and "
                             << kTrickling << " trickling clients were connected";
    EXPECT_LT(seconds, 3.0) << "GET /metrics (scrape " << scrape << ") took " << seconds
                            << " s while " << kIdle << " idle clients and " << kTrickling
                            << " trickling clients were connected";
    EXPECT_TRUE(absl::StrContains(r.body, "rnnserve_model_loaded{")) << r.body;
    if (r.status != 200) break;
  }
  stop = true;
  trickler.join();
  for (int fd : idle) close(fd);
  for (int fd : trickling) close(fd);
}

TEST_F(MetricsServerTest, PrometheusStoresTheRequestCountAndFiniteQuantiles) {
  if (!HavePrometheus()) {
    GTEST_SKIP() << "prometheus not found; install the Debian package prometheus";
  }
  std::string error;
  const std::string config = PrometheusConfig(metrics_port_, &error);
  ASSERT_TRUE(error.empty()) << error;
  std::unique_ptr<PrometheusProcess> prom = PrometheusProcess::Start(config, &error);
  ASSERT_NE(prom, nullptr) << error;
  // The target is up: the series exist at zero before the first request.
  ASSERT_EQ(prom->QueryUntil("up{job=\"rnnserve\"}", [](double v) { return v == 1; }), 1)
      << prom->Log();

  constexpr int kOk = 40;
  constexpr int kBad = 3;
  for (int i = 0; i < kOk; ++i) ASSERT_EQ(Predict(1 + i % 4, 4 + i % 9, 2), grpc::StatusCode::OK);
  for (int i = 0; i < kBad; ++i) ASSERT_EQ(Predict(1, 4, 3), grpc::StatusCode::INVALID_ARGUMENT);

  const std::string ok = absl::StrCat(
      "sum(rnnserve_requests_total{job=\"rnnserve\",model=\"waveform_lstm\",method=\"Predict\","
      "code=\"OK\"})");
  EXPECT_EQ(prom->QueryUntil(ok, [](double v) { return v == kOk; }), kOk) << prom->Log();
  EXPECT_EQ(prom->QueryUntil(absl::StrCat("sum(rnnserve_requests_total{model=\"waveform_lstm\","
                                          "code=\"INVALID_ARGUMENT\"})"),
                             [](double v) { return v == kBad; }),
            kBad);

  auto finite_positive = [](double v) { return std::isfinite(v) && v > 0; };
  const double p99 = prom->QueryUntil(
      "histogram_quantile(0.99, sum by (le) (rate(rnnserve_request_duration_seconds_bucket{"
      "model=\"waveform_lstm\",method=\"Predict\"}[1m])))",
      finite_positive);
  EXPECT_TRUE(finite_positive(p99)) << p99;
  EXPECT_LT(p99, 10.0);
  // The recording rules of deploy/prometheus/rules, evaluated by the real server.
  EXPECT_TRUE(finite_positive(prom->QueryUntil(
      "rnnserve:request_duration_seconds:p99{model=\"waveform_lstm\",method=\"Predict\"}",
      finite_positive)));
  EXPECT_TRUE(finite_positive(prom->QueryUntil(
      "rnnserve:compute_duration_seconds:p99{model=\"waveform_lstm\",engine=\"cpu\"}",
      finite_positive)));
  EXPECT_EQ(prom->QueryUntil("sum(rnnserve_batch_size_count{model=\"waveform_lstm\"})",
                             [](double v) { return v == kOk; }),
            kOk);
}

}  // namespace
}  // namespace rnnserve::testing
