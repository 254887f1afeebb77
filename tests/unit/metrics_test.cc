// rnnserve's metric set on prometheus-cpp (series, labels, buckets, as a scrape sees them), the
// process collector and the /metrics HTTP endpoint.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "server/metrics/batch_timesteps.h"
#include "server/metrics/endpoint.h"
#include "server/metrics/process_metrics.h"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {
namespace {

// One HTTP exchange on 127.0.0.1:port; returns everything the server sent.
std::string HttpExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};  // a server that never answers fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

ModelLoadInfo Info(std::string name, int64_t version, std::vector<std::string> engines = {},
                   std::vector<int64_t> memory_bytes = {}) {
  ModelLoadInfo info;
  info.name = std::move(name);
  info.version = version;
  info.load_duration = absl::Milliseconds(250);
  info.engines = std::move(engines);
  info.memory_bytes = std::move(memory_bytes);
  return info;
}

EndpointOptions Options(int port) {
  EndpointOptions o;
  o.port = port;
  return o;
}

// prometheus-cpp writes a series' labels sorted by name (a histogram's `le` last).
void ExpectLines(const std::string& text, const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\nin:\n" << text;
  }
}

TEST(ServerMetricsTest, LoadedModelSeriesExistAtZero) {
  ServerMetrics m;
  m.ModelLoaded(Info("lstm", 3, {"cpu", "cpu"}, {1000, 24}));
  ExpectLines(
      m.ExpositionText(),
      {
          "rnnserve_requests_total{code=\"OK\",method=\"Predict\",model=\"lstm\",version=\"3\"} "
          "0\n",
          "rnnserve_request_duration_seconds_count{method=\"Predict\",model=\"lstm\","
          "version=\"3\"} 0\n",
          "rnnserve_queue_duration_seconds_bucket{model=\"lstm\",version=\"3\",le=\"1e-05\"} 0\n",
          "rnnserve_compute_duration_seconds_count{engine=\"cpu\",model=\"lstm\",version=\"3\"} "
          "0\n",
          "rnnserve_batch_size_count{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_batch_timesteps_real_total{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_batch_timesteps_computed_total{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_queue_depth{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_inflight_requests{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_sequences_active{model=\"lstm\",version=\"3\"} 0\n",
          "rnnserve_model_loaded{model=\"lstm\",version=\"3\"} 1\n",
          "rnnserve_model_load_duration_seconds{model=\"lstm\",version=\"3\"} 0.25\n",
          "rnnserve_model_memory_bytes{engine=\"cpu\",model=\"lstm\",version=\"3\"} 1024\n",
          "# TYPE rnnserve_request_duration_seconds histogram\n",
          "# TYPE rnnserve_requests_total counter\n",
          "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
          "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ",
      });
}

TEST(ServerMetricsTest, LatencyBucketsAreTenMicrosecondsToTenSecondsUpperInclusive) {
  ServerMetrics m;
  ModelMetrics& model = m.ModelLoaded(Info("a", 1));
  model.RequestCounted("Predict", absl::StatusCode::kOk, absl::Microseconds(10));  // le=1e-05
  model.RequestCounted("Predict", absl::StatusCode::kOk, absl::Seconds(11));       // +Inf
  const std::string text = m.ExpositionText();
  const std::string prefix =
      "rnnserve_request_duration_seconds_bucket{method=\"Predict\",model=\"a\",version=\"1\",le=";
  std::vector<std::string> lines;
  for (const char* le :
       {"1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
        "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"}) {
    lines.push_back(absl::StrCat(prefix, "\"", le, "\"} 1\n"));
  }
  lines.push_back(prefix + "\"+Inf\"} 2\n");
  ExpectLines(text, lines);
  // 19 bounds and +Inf, nothing else.
  size_t buckets = 0;
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    ++buckets;
  }
  EXPECT_EQ(buckets, 20u);
}

TEST(ServerMetricsTest, FindVersionZeroIsTheNewestLoadedAndUnknownIsNull) {
  ServerMetrics m;
  ModelMetrics& v1 = m.ModelLoaded(Info("a", 1));
  ModelMetrics& v2 = m.ModelLoaded(Info("a", 2));
  EXPECT_EQ(m.Find("a", 0), &v2);
  EXPECT_EQ(m.Find("a", 1), &v1);
  EXPECT_EQ(m.Find("a", 7), nullptr);
  EXPECT_EQ(m.Find("b", 0), nullptr);
  m.ModelUnloaded("a", 2);
  EXPECT_EQ(m.Find("a", 0), &v1);
}

TEST(ServerMetricsTest, UnloadedVersionLeavesThePageAndComesBackWhenLoadedAgain) {
  ServerMetrics m;
  m.ModelLoaded(Info("a", 1));
  ModelMetrics& v2 = m.ModelLoaded(Info("a", 2));
  v2.RequestStarted();
  v2.RequestFinished("Predict", absl::StatusCode::kOk, absl::Milliseconds(1));
  m.ModelUnloaded("a", 2);
  const std::string page = m.ExpositionText();
  EXPECT_FALSE(absl::StrContains(page, "version=\"2\"")) << page;
  ExpectLines(page, {"rnnserve_model_loaded{model=\"a\",version=\"1\"} 1\n"});
  // A request still running on the unloaded version records safely, unseen.
  v2.RecordBatch({.engine = "cpu", .batch_size = 1, .real_timesteps = 3, .computed_timesteps = 3});
  EXPECT_FALSE(absl::StrContains(m.ExpositionText(), "version=\"2\""));
  m.ModelUnloaded("a", 1);
  EXPECT_FALSE(absl::StrContains(m.ExpositionText(), "model=\"a\"")) << m.ExpositionText();
  // Loaded again: its series are back, counters where they were.
  m.ModelLoaded(Info("a", 2));
  ExpectLines(
      m.ExpositionText(),
      {"rnnserve_model_loaded{model=\"a\",version=\"2\"} 1\n",
       "rnnserve_requests_total{code=\"OK\",method=\"Predict\",model=\"a\",version=\"2\"} 1\n"});
}

TEST(ServerMetricsTest, FailedLoadExportsModelLoadedZero) {
  ServerMetrics m;
  m.ModelLoadFailed("broken", 0);
  m.ModelLoadFailed("broken2", 4);
  ExpectLines(m.ExpositionText(), {
                                      "rnnserve_model_loaded{model=\"broken\",version=\"\"} 0\n",
                                      "rnnserve_model_loaded{model=\"broken2\",version=\"4\"} 0\n",
                                  });
  // The broken model's directory is removed: its series go.
  m.ModelUnloaded("broken", 0);
  EXPECT_FALSE(absl::StrContains(m.ExpositionText(), "model=\"broken\""));
}

TEST(ServerMetricsTest, RequestsAreCountedByMethodAndCodeAndLeaveInflight) {
  ServerMetrics m;
  ModelMetrics& model = m.ModelLoaded(Info("a", 1));
  model.RequestStarted();
  model.RequestStarted();
  model.RequestFinished("Predict", absl::StatusCode::kOk, absl::Microseconds(30));
  model.RequestFinished("Predict", absl::StatusCode::kInvalidArgument, absl::Milliseconds(2));
  model.RequestCounted("SomeNewMethod", absl::StatusCode::kOk, absl::Milliseconds(1));
  m.unmatched().RequestCounted("Predict", absl::StatusCode::kNotFound, absl::Microseconds(5));
  ExpectLines(
      m.ExpositionText(),
      {
          "rnnserve_requests_total{code=\"OK\",method=\"Predict\",model=\"a\",version=\"1\"} 1\n",
          "rnnserve_requests_total{code=\"INVALID_ARGUMENT\",method=\"Predict\",model=\"a\","
          "version=\"1\"} 1\n",
          "rnnserve_requests_total{code=\"OK\",method=\"SomeNewMethod\",model=\"a\","
          "version=\"1\"} 1\n",
          "rnnserve_requests_total{code=\"NOT_FOUND\",method=\"Predict\",model=\"\",version=\"\"} "
          "1\n",
          "rnnserve_request_duration_seconds_bucket{method=\"Predict\",model=\"a\",version=\"1\","
          "le=\"2.5e-05\"} 0\n",
          "rnnserve_request_duration_seconds_bucket{method=\"Predict\",model=\"a\",version=\"1\","
          "le=\"5e-05\"} 1\n",
          "rnnserve_request_duration_seconds_count{method=\"Predict\",model=\"a\",version=\"1\"} "
          "2\n",
          "rnnserve_inflight_requests{model=\"a\",version=\"1\"} 0\n",
      });
}

TEST(ServerMetricsTest, UnmatchedRequestsCreateOnlyRequestSeries) {
  ServerMetrics m;
  m.unmatched().RequestStarted();
  m.unmatched().RequestFinished("Predict", absl::StatusCode::kNotFound, absl::Microseconds(5));
  m.unmatched().QueueEntered();
  m.unmatched().RecordBatch({.engine = "cpu",
                             .batch_size = 1,
                             .real_timesteps = 1,
                             .computed_timesteps = 1,
                             .compute = absl::Microseconds(1)});
  const std::string text = m.ExpositionText();
  EXPECT_TRUE(absl::StrContains(text,
                                "rnnserve_requests_total{code=\"NOT_FOUND\",method="
                                "\"Predict\",model=\"\",version=\"\"} 1\n"))
      << text;
  for (const char* family :
       {"rnnserve_queue_depth{", "rnnserve_inflight_requests{", "rnnserve_batch_size_count{",
        "rnnserve_compute_duration_seconds_count{", "rnnserve_batch_timesteps_real_total{"}) {
    EXPECT_FALSE(absl::StrContains(text, family)) << family << "\nin:\n" << text;
  }
}

TEST(ServerMetricsTest, BatchRecordsSizeTimestepsQueueAndComputePerEngine) {
  ServerMetrics m;
  ModelMetrics& model = m.ModelLoaded(Info("a", 1, {"cpu"}));
  model.QueueEntered();
  model.QueueEntered();
  model.QueueLeft(absl::Microseconds(100));
  model.RecordBatch({.engine = "cuda",
                     .batch_size = 3,
                     .real_timesteps = 20,
                     .computed_timesteps = 30,
                     .compute = absl::Milliseconds(1)});
  model.SetQueueCapacity(64);
  ExpectLines(
      m.ExpositionText(),
      {
          "rnnserve_queue_depth{model=\"a\",version=\"1\"} 1\n",
          "rnnserve_queue_capacity{model=\"a\",version=\"1\"} 64\n",
          "rnnserve_queue_duration_seconds_count{model=\"a\",version=\"1\"} 1\n",
          "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"2\"} 0\n",
          "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"4\"} 1\n",
          "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"1024\"} 1\n",
          "rnnserve_batch_timesteps_real_total{model=\"a\",version=\"1\"} 20\n",
          "rnnserve_batch_timesteps_computed_total{model=\"a\",version=\"1\"} 30\n",
          "rnnserve_compute_duration_seconds_count{engine=\"cuda\",model=\"a\",version=\"1\"} 1\n",
          "rnnserve_compute_duration_seconds_count{engine=\"cpu\",model=\"a\",version=\"1\"} 0\n",
      });
}

TEST(ServerMetricsTest, ConcurrentRecordingFromManyThreadsIsAllCounted) {
  ServerMetrics m;
  ModelMetrics& model = m.ModelLoaded(Info("a", 1, {"cpu"}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&model] {
      for (int i = 0; i < 10000; ++i) {
        model.RequestStarted();
        model.RequestFinished("ModelInfer", absl::StatusCode::kOk, absl::Microseconds(20));
        model.RecordBatch({.engine = "cpu",
                           .batch_size = 2,
                           .real_timesteps = 1,
                           .computed_timesteps = 2,
                           .compute = absl::Microseconds(20)});
      }
    });
  }
  for (auto& t : threads) t.join();
  ExpectLines(
      m.ExpositionText(),
      {
          "rnnserve_requests_total{code=\"OK\",method=\"ModelInfer\",model=\"a\",version=\"1\"} "
          "80000\n",
          "rnnserve_request_duration_seconds_bucket{method=\"ModelInfer\",model=\"a\","
          "version=\"1\",le=\"2.5e-05\"} 80000\n",
          "rnnserve_inflight_requests{model=\"a\",version=\"1\"} 0\n",
          "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"2\"} 80000\n",
          "rnnserve_batch_size_sum{model=\"a\",version=\"1\"} 160000\n",
          "rnnserve_batch_timesteps_computed_total{model=\"a\",version=\"1\"} 160000\n",
          "rnnserve_compute_duration_seconds_count{engine=\"cpu\",model=\"a\",version=\"1\"} "
          "80000\n",
      });
}

TEST(ServerMetricsTest, TritonStatisticsComeFromTheSameEventsAsTheSeries) {
  ServerMetrics m;
  ModelMetrics& model = m.ModelLoaded(Info("a", 1, {"cpu"}));
  model.RequestStarted();
  model.RequestFinished("ModelInfer", absl::StatusCode::kOk, absl::Microseconds(30));
  model.RequestStarted();
  model.RequestFinished("Predict", absl::StatusCode::kInvalidArgument, absl::Microseconds(5));
  model.RequestStarted();
  model.RequestFinished("ModelMetadata", absl::StatusCode::kOk, absl::Microseconds(7));
  model.QueueEntered();
  model.QueueLeft(absl::Microseconds(4));
  model.RecordBatch({.engine = "cpu", .batch_size = 3, .compute = absl::Microseconds(10)});
  model.RecordBatch({.engine = "cpu", .batch_size = 1, .compute = absl::Microseconds(2)});
  model.RecordPhases(absl::Microseconds(1), absl::Microseconds(8), absl::Microseconds(2));
  const InferenceStatistics s = model.Statistics();
  EXPECT_EQ(s.success.count, 1u);  // metadata is not an inference
  EXPECT_EQ(s.success.ns, 30000u);
  EXPECT_EQ(s.fail.count, 1u);
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_EQ(s.inference_count, 4u);
  ASSERT_EQ(s.batch_compute.size(), 2u);
  // The per-request phases count together (perf_analyzer needs equal counts).
  EXPECT_EQ(s.queue.count, 1u);
  EXPECT_EQ(s.compute_input.count, 1u);
  EXPECT_EQ(s.compute_infer.count, 1u);
  EXPECT_EQ(s.compute_output.count, 1u);
  EXPECT_EQ(s.compute_infer.ns, 8000u);
  EXPECT_EQ(s.batch_compute.at(3).ns, 10000u);
  EXPECT_EQ(s.compute_input.ns, 1000u);
  EXPECT_EQ(s.compute_output.ns, 2000u);
  EXPECT_GT(s.last_inference_ms, 0u);
  ExpectLines(m.ExpositionText(),
              {"rnnserve_batch_size_count{model=\"a\",version=\"1\"} 2\n",
               "rnnserve_queue_duration_seconds_count{model=\"a\",version=\"1\"} 1\n"});
}

TEST(BatchTimestepsTest, LengthsCountRealStepsAndShapeCountsComputed) {
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({3, 5, 2}, std::vector<float>(30, 0.f)));
  EXPECT_EQ(CountTimesteps(batch).real, 15);
  batch.lengths = {5, 2, 1};
  const Timesteps t = CountTimesteps(batch);
  EXPECT_EQ(t.batch_size, 3);
  EXPECT_EQ(t.real, 8);
  EXPECT_EQ(t.computed, 15);
}

// An Embedding model's input: [B, T] token ids, every id a time step.
TEST(BatchTimestepsTest, TokenIdsCountEveryStep) {
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Int64({8, 60}, std::vector<int64_t>(480, 1)));
  Timesteps t = CountTimesteps(batch);
  EXPECT_EQ(t.batch_size, 8);
  EXPECT_EQ(t.computed, 8 * 60);
  EXPECT_EQ(t.real, 8 * 60);
  batch.lengths = {60, 1, 0, 10, 20, 30, 40, 50};
  t = CountTimesteps(batch);
  EXPECT_EQ(t.computed, 8 * 60);
  EXPECT_EQ(t.real, 211);
  // [B, F] values have no time axis: one step per sequence.
  engine::Batch flat;
  flat.inputs.push_back(engine::Tensor::Float({4, 16}));
  EXPECT_EQ(CountTimesteps(flat).computed, 4);
}

TEST(ProcessMetricsTest, ReadsCpuResidentMemoryAndStartTimeFromProc) {
  ProcessStats s;
  ASSERT_TRUE(ReadProcessStats(&s));
  EXPECT_GT(s.resident_bytes, 1 << 20);
  EXPECT_GE(s.virtual_bytes, s.resident_bytes);
  EXPECT_GE(s.cpu_seconds, 0);
  EXPECT_GT(s.start_time_seconds, 1.6e9);
  EXPECT_GE(s.open_fds, 3);
}

TEST(ProcessMetricsTest, CollectorGivesTheFiveStandardFamiliesWithOneSampleEach) {
  const std::vector<prometheus::MetricFamily> families = NewProcessCollector()->Collect();
  std::vector<std::string> names;
  for (const auto& f : families) {
    names.push_back(f.name);
    EXPECT_EQ(f.metric.size(), 1u) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"process_cpu_seconds_total", "process_resident_memory_bytes",
                                      "process_virtual_memory_bytes", "process_start_time_seconds",
                                      "process_open_fds"}));
  ASSERT_EQ(families.size(), 5u);
  EXPECT_EQ(families[0].type, prometheus::MetricType::Counter);
  EXPECT_GT(families[1].metric[0].gauge.value, 1 << 20);
}

class EndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.ModelLoaded(Info("lstm", 2, {"cpu"}, {64}));
    auto e = StartEndpoint(metrics_, Options(0));
    ASSERT_TRUE(e.ok()) << e.status();
    endpoint_ = std::move(*e);
    port_ = endpoint_->port();
    ASSERT_GT(port_, 0);
  }
  ServerMetrics metrics_;
  std::unique_ptr<Endpoint> endpoint_;
  int port_ = 0;
};

TEST_F(EndpointTest, GetMetricsServesRnnserveAndProcessFamiliesAsText) {
  const std::string r = HttpExchange(port_, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: text/plain")) << r;
  ExpectLines(r,
              {
                  "\n# TYPE rnnserve_model_loaded gauge\n",
                  "rnnserve_model_loaded{model=\"lstm\",version=\"2\"} 1\n",
                  "rnnserve_model_memory_bytes{engine=\"cpu\",model=\"lstm\",version=\"2\"} 64\n",
                  "\nprocess_resident_memory_bytes ",
              });
}

TEST_F(EndpointTest, UnknownPathIs404) {
  EXPECT_TRUE(absl::StartsWith(HttpExchange(port_, "GET /nope HTTP/1.1\r\n\r\n"), "HTTP/1.1 404"));
}

TEST_F(EndpointTest, SilentClientDoesNotDelayAScrape) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // Sends nothing and holds one worker; another answers the scrape meanwhile.
  const absl::Time start = absl::Now();
  EXPECT_TRUE(
      absl::StartsWith(HttpExchange(port_, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  close(fd);
}

// A connection to 127.0.0.1:port that sends nothing; -1 when refused.
int ConnectSilently(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// `gz`, a gzip member, inflated; empty when it is not one.
std::string Gunzip(const std::string& gz) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return "";
  std::string out(1 << 22, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = inflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(z.total_out);
  inflateEnd(&z);
  return done ? out : "";
}

TEST_F(EndpointTest, GzipWhenTheScraperAcceptsIt) {
  const std::string r = HttpExchange(
      port_, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: deflate, GZIP\r\n\r\n");
  ASSERT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "\r\nContent-Encoding: gzip\r\n")) << r;
  const size_t body = r.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  const std::string text = Gunzip(r.substr(body + 4));
  EXPECT_TRUE(absl::StrContains(text, "rnnserve_model_loaded{model=\"lstm\",version=\"2\"} 1\n"))
      << text;
}

TEST_F(EndpointTest, ExposerFamiliesCountTheScrapes) {
  HttpExchange(port_, "GET /metrics HTTP/1.1\r\n\r\n");
  const std::string r = HttpExchange(port_, "GET /metrics?x=1 HTTP/1.1\r\n\r\n");
  ExpectLines(r,
              {"\nexposer_scrapes_total 1\n", "\n# TYPE exposer_transferred_bytes_total counter\n",
               "\n# TYPE exposer_request_latencies summary\n"});
}

TEST_F(EndpointTest, HeadHasTheHeadAndOtherMethodsAre405) {
  const std::string head = HttpExchange(port_, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 200 OK\r\n")) << head;
  EXPECT_TRUE(absl::EndsWith(head, "\r\n\r\n")) << head;
  EXPECT_TRUE(
      absl::StartsWith(HttpExchange(port_, "POST /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 405"));
  EXPECT_TRUE(absl::StartsWith(HttpExchange(port_, "hello\r\n\r\n"), "HTTP/1.1 400"));
  EXPECT_TRUE(absl::StartsWith(
      HttpExchange(
          port_, absl::StrCat("GET /metrics HTTP/1.1\r\nX: ", std::string(9000, 'a'), "\r\n\r\n")),
      "HTTP/1.1 431"));
}

// A client that sends its request and then shuts its side (as `nc -N` does) is answered.
TEST_F(EndpointTest, RequestFollowedByShutdownIsAnswered) {
  const int fd = ConnectSilently(port_);
  ASSERT_GE(fd, 0);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_TRUE(absl::StartsWith(out, "HTTP/1.1 200 OK\r\n")) << out;
}

// With max_connections open and silent, one more connection closes the oldest, and a scrape
// is answered.
TEST(EndpointLimitsTest, OverTheConnectionCapTheOldestSilentConnectionIsClosed) {
  ServerMetrics m;
  m.ModelLoaded(Info("lstm", 2, {"cpu"}, {64}));
  EndpointOptions o = Options(0);
  o.max_connections = 4;
  auto e = StartEndpoint(m, o);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<int> silent;
  for (int i = 0; i < 8; ++i) {
    silent.push_back(ConnectSilently((*e)->port()));
    ASSERT_GE(silent.back(), 0);
  }
  EXPECT_TRUE(absl::StartsWith(HttpExchange((*e)->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 200 OK"));
  char c;
  EXPECT_EQ(recv(silent[0], &c, 1, 0), 0) << "the oldest connection is still open";
  for (int fd : silent) close(fd);
}

// A connection that sends nothing is closed request_timeout_ms after it was accepted.
TEST(EndpointLimitsTest, SilentConnectionIsClosedAfterTheRequestTimeout) {
  ServerMetrics m;
  EndpointOptions o = Options(0);
  o.request_timeout_ms = 100;
  auto e = StartEndpoint(m, o);
  ASSERT_TRUE(e.ok()) << e.status();
  const int fd = ConnectSilently((*e)->port());  // receives give up after 5 s
  ASSERT_GE(fd, 0);
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0) << "not closed by the server";
  close(fd);
}

TEST(EndpointOptionsTest, BadPortConnectionsTimeoutAndIpv6HostAreRejectedAtStart) {
  ServerMetrics m;
  EndpointOptions o = Options(70000);
  EXPECT_EQ(StartEndpoint(m, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(0);
  o.max_connections = 0;
  EXPECT_EQ(StartEndpoint(m, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(0);
  o.request_timeout_ms = 0;
  EXPECT_EQ(StartEndpoint(m, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(0);
  o.host = "::1";
  auto v6 = StartEndpoint(m, o);
  EXPECT_EQ(v6.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(v6.status().message(), "'::1'")) << v6.status();
}

// endpoint.cc's pthread_attr_setstacksize: civetweb's fixed 100 KiB thread stacks keep 100 KiB
// usable beside the process's static TLS (which, with cuBLASLt loaded, exceeds 100 KiB).
TEST(EndpointThreadStackTest, RequestedStackGrowsByTheProcessTlsAndThreadsStart) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 102400), 0);
  size_t size = 0;
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &size), 0);
  EXPECT_GT(size, 102400u);  // libc and libstdc++ alone hold some TLS
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr, [](void*) -> void* { return nullptr; }, nullptr),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(EndpointOptionsTest, PortInUseFailsWithTheAddress) {
  ServerMetrics m;
  auto first = StartEndpoint(m, Options(0));
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = StartEndpoint(m, Options(port));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), absl::StrCat("127.0.0.1:", port)))
      << second.status();
}

}  // namespace
}  // namespace rnnserve::server::metrics
