// The metrics library: values, exposition text, label series, rnnserve's metric set and the
// /metrics HTTP endpoint.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/metrics/batch_timesteps.h"
#include "server/metrics/exposer.h"
#include "server/metrics/process_metrics.h"
#include "server/metrics/registry.h"
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

ExposerOptions Options(int port, int read_timeout_ms = 5000) {
  ExposerOptions o;
  o.port = port;
  o.read_timeout_ms = read_timeout_ms;
  return o;
}

TEST(MetricsTextTest, ValuesPrintShortestRoundTripAndSpecialNames) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  EXPECT_EQ(FormatValue(123456789012.0), "123456789012");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(MetricsTextTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(MetricsHistogramTest, UpperBoundsAreInclusiveAndNanGoesToInf) {
  Histogram h({1.0, 2.0});
  h.Observe(1.0);  // le=1
  h.Observe(1.5);  // le=2
  h.Observe(2.0);  // le=2
  h.Observe(3.0);  // +Inf
  h.Observe(std::nan(""));
  EXPECT_EQ(h.bucket_count(0), 1u);
  EXPECT_EQ(h.bucket_count(1), 2u);
  EXPECT_EQ(h.bucket_count(2), 2u);
}

TEST(MetricsHistogramTest, LatencyBucketsSpanTenMicrosecondsToTenSeconds) {
  const std::vector<double> b = LatencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 1e-5);
  EXPECT_EQ(b.back(), 10.0);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(std::adjacent_find(b.begin(), b.end()), b.end());
}

TEST(MetricsCounterTest, NegativeIncrementsAreIgnored) {
  Counter c;
  c.Increment(2);
  c.Increment(-5);
  EXPECT_EQ(c.value(), 2);
}

TEST(MetricsRegistryTest, RendersHelpTypeAndCumulativeHistogram) {
  Registry r;
  r.AddCounter("x_total", "Things.", {"a"}).WithLabels({"q\""}).Increment(3);
  r.AddGauge("g", "A gauge.").WithLabels({}).Set(-1.5);
  Histogram& h = r.AddHistogram("h_seconds", "Time.", {"m"}, {0.5, 1}).WithLabels({"k"});
  h.Observe(0.25);
  h.Observe(0.75);
  h.Observe(4);
  EXPECT_EQ(r.Render(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"q\\\"\"} 3\n"
            "# HELP g A gauge.\n# TYPE g gauge\ng -1.5\n"
            "# HELP h_seconds Time.\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{m=\"k\",le=\"0.5\"} 1\n"
            "h_seconds_bucket{m=\"k\",le=\"1\"} 2\n"
            "h_seconds_bucket{m=\"k\",le=\"+Inf\"} 3\n"
            "h_seconds_sum{m=\"k\"} 5\n"
            "h_seconds_count{m=\"k\"} 3\n");
}

TEST(MetricsRegistryTest, WithLabelsReturnsTheSameSeriesForTheSameValues) {
  Registry r;
  Family<Counter>& f = r.AddCounter("c_total", "C.", {"a", "b"});
  EXPECT_EQ(&f.WithLabels({"1", "2"}), &f.WithLabels({"1", "2"}));
  EXPECT_NE(&f.WithLabels({"1", "2"}), &f.WithLabels({"2", "1"}));
}

TEST(MetricsRegistryTest, ConcurrentIncrementsAreAllCounted) {
  Registry r;
  Counter& c = r.AddCounter("c_total", "C.").WithLabels({});
  Histogram& h = r.AddHistogram("h", "H.", {}, {1}).WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Increment();
        h.Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 80000);
  EXPECT_EQ(h.bucket_count(0), 80000u);
  EXPECT_EQ(h.sum(), 40000);
}

TEST(ServerMetricsTest, LoadedModelSeriesExistAtZero) {
  ServerMetrics m;
  m.ModelLoaded(Info("lstm", 3, {"cpu", "cpu"}, {1000, 24}));
  const std::string text = m.registry().Render();
  for (const char* line : {
           "rnnserve_requests_total{model=\"lstm\",version=\"3\",method=\"Predict\",code=\"OK\"} 0",
           "rnnserve_request_duration_seconds_count{model=\"lstm\",version=\"3\",method="
           "\"Predict\"}"
           " 0",
           "rnnserve_queue_duration_seconds_bucket{model=\"lstm\",version=\"3\",le=\"1e-05\"} 0",
           "rnnserve_compute_duration_seconds_count{model=\"lstm\",version=\"3\",engine=\"cpu\"} 0",
           "rnnserve_batch_size_count{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_batch_timesteps_real_total{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_batch_timesteps_computed_total{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_queue_depth{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_inflight_requests{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_sequences_active{model=\"lstm\",version=\"3\"} 0",
           "rnnserve_model_loaded{model=\"lstm\",version=\"3\"} 1",
           "rnnserve_model_load_duration_seconds{model=\"lstm\",version=\"3\"} 0.25",
           "rnnserve_model_memory_bytes{model=\"lstm\",version=\"3\",engine=\"cpu\"} 1024",
           "process_cpu_seconds_total ",
           "process_resident_memory_bytes ",
       }) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\nin:\n" << text;
  }
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
  EXPECT_TRUE(absl::StrContains(m.registry().Render(),
                                "rnnserve_model_loaded{model=\"a\",version=\"2\"} 0"));
}

TEST(ServerMetricsTest, FailedLoadExportsModelLoadedZero) {
  ServerMetrics m;
  m.ModelLoadFailed("broken", 0);
  m.ModelLoadFailed("broken2", 4);
  const std::string text = m.registry().Render();
  EXPECT_TRUE(absl::StrContains(text, "rnnserve_model_loaded{model=\"broken\",version=\"\"} 0"));
  EXPECT_TRUE(absl::StrContains(text, "rnnserve_model_loaded{model=\"broken2\",version=\"4\"} 0"));
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
  const std::string text = m.registry().Render();
  for (const char* line : {
           "rnnserve_requests_total{model=\"a\",version=\"1\",method=\"Predict\",code=\"OK\"} 1",
           "rnnserve_requests_total{model=\"a\",version=\"1\",method=\"Predict\","
           "code=\"INVALID_ARGUMENT\"} 1",
           "rnnserve_requests_total{model=\"a\",version=\"1\",method=\"SomeNewMethod\",code=\"OK\"}"
           " 1",
           "rnnserve_requests_total{model=\"\",version=\"\",method=\"Predict\",code=\"NOT_FOUND\"} "
           "1",
           "rnnserve_request_duration_seconds_bucket{model=\"a\",version=\"1\",method=\"Predict\","
           "le=\"2.5e-05\"} 0",
           "rnnserve_request_duration_seconds_bucket{model=\"a\",version=\"1\",method=\"Predict\","
           "le=\"5e-05\"} 1",
           "rnnserve_request_duration_seconds_count{model=\"a\",version=\"1\",method=\"Predict\"} "
           "2",
           "rnnserve_inflight_requests{model=\"a\",version=\"1\"} 0",
       }) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\nin:\n" << text;
  }
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
  const std::string text = m.registry().Render();
  EXPECT_TRUE(absl::StrContains(text, "rnnserve_requests_total{model=\"\",version=\"\","));
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
  const std::string text = m.registry().Render();
  for (const char* line : {
           "rnnserve_queue_depth{model=\"a\",version=\"1\"} 1",
           "rnnserve_queue_capacity{model=\"a\",version=\"1\"} 64",
           "rnnserve_queue_duration_seconds_count{model=\"a\",version=\"1\"} 1",
           "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"2\"} 0",
           "rnnserve_batch_size_bucket{model=\"a\",version=\"1\",le=\"4\"} 1",
           "rnnserve_batch_timesteps_real_total{model=\"a\",version=\"1\"} 20",
           "rnnserve_batch_timesteps_computed_total{model=\"a\",version=\"1\"} 30",
           "rnnserve_compute_duration_seconds_count{model=\"a\",version=\"1\",engine=\"cuda\"} 1",
           "rnnserve_compute_duration_seconds_count{model=\"a\",version=\"1\",engine=\"cpu\"} 0",
       }) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\nin:\n" << text;
  }
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

TEST(ProcessMetricsTest, ReadsCpuResidentMemoryAndStartTimeFromProc) {
  ProcessStats s;
  ASSERT_TRUE(ReadProcessStats(&s));
  EXPECT_GT(s.resident_bytes, 1 << 20);
  EXPECT_GE(s.virtual_bytes, s.resident_bytes);
  EXPECT_GE(s.cpu_seconds, 0);
  EXPECT_GT(s.start_time_seconds, 1.6e9);
  EXPECT_GE(s.open_fds, 3);
}

class ExposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.AddCounter("x_total", "X.").WithLabels({}).Increment(7);
    auto e = Exposer::Start(&registry_, Options(0, 500));
    ASSERT_TRUE(e.ok()) << e.status();
    exposer_ = std::move(*e);
    ASSERT_GT(exposer_->port(), 0);
  }
  Registry registry_;
  std::unique_ptr<Exposer> exposer_;
};

TEST_F(ExposerTest, GetMetricsServesTextFormatWithContentType) {
  const std::string r = HttpExchange(exposer_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_TRUE(
      absl::StrContains(r, "\r\n\r\n# HELP x_total X.\n# TYPE x_total counter\nx_total 7\n"));
  EXPECT_TRUE(absl::StrContains(r, absl::StrCat("Content-Length: ", registry_.Render().size())));
}

TEST_F(ExposerTest, HeadSendsHeadersOnly) {
  const std::string r = HttpExchange(exposer_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n")) << r;
}

TEST_F(ExposerTest, UnknownPathIs404AndPostIs405AndGarbageIs400) {
  EXPECT_TRUE(absl::StartsWith(HttpExchange(exposer_->port(), "GET /nope HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 404"));
  EXPECT_TRUE(absl::StartsWith(HttpExchange(exposer_->port(), "POST /metrics HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 405"));
  EXPECT_TRUE(absl::StartsWith(HttpExchange(exposer_->port(), "hello\r\n\r\n"), "HTTP/1.1 400"));
}

TEST_F(ExposerTest, SilentClientIsDroppedAndLaterScrapesStillAnswer) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(exposer_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // Sends nothing; the exposer gives up after read_timeout_ms (500 ms) and serves the next.
  EXPECT_TRUE(absl::StartsWith(HttpExchange(exposer_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 200 OK"));
  close(fd);
}

TEST(ExposerOptionsTest, BadPortAndTimeoutAreRejectedAtStart) {
  Registry r;
  EXPECT_EQ(Exposer::Start(&r, Options(70000)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Exposer::Start(&r, Options(0, 0)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExposerOptionsTest, PortInUseFailsWithTheAddress) {
  Registry r;
  auto first = Exposer::Start(&r, Options(0));
  ASSERT_TRUE(first.ok());
  auto second = Exposer::Start(&r, Options((*first)->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::StrContains(second.status().message(), std::to_string((*first)->port())));
}

}  // namespace
}  // namespace rnnserve::server::metrics
