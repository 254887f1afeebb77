// deploy/prometheus and the /metrics exposition, checked by Prometheus's own promtool
// (Debian package prometheus), and the Grafana dashboard checked against what is exported.
// promtool tests skip, saying so, where promtool is not installed.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {
namespace {

const std::string kSource = RNNSERVE_SOURCE_DIR;

// Runs a shell command; returns its exit code and puts stdout+stderr in *out.
int Shell(const std::string& command, std::string* out) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  out->clear();
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HavePromtool() {
  std::string out;
  return Shell("command -v promtool", &out) == 0;
}

constexpr char kNoPromtool[] = "promtool not found; install the Debian package prometheus";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Model "lstm" version 1 on one cpu instance, loaded into `m`.
ModelMetrics& LoadLstm(ServerMetrics* m) {
  ModelLoadInfo info;
  info.name = "lstm";
  info.version = 1;
  info.engines = {"cpu"};
  info.memory_bytes = {4096};
  return m->ModelLoaded(info);
}

TEST(PrometheusDeployTest, ConfigAndItsRuleFilesPassPromtoolCheckConfig) {
  if (!HavePromtool()) GTEST_SKIP() << kNoPromtool;
  std::string out;
  EXPECT_EQ(Shell("promtool check config " + kSource + "/deploy/prometheus/prometheus.yml", &out),
            0)
      << out;
}

TEST(PrometheusDeployTest, RecordingAndAlertRulesPassPromtoolCheckRules) {
  if (!HavePromtool()) GTEST_SKIP() << kNoPromtool;
  std::string out;
  EXPECT_EQ(Shell(absl::StrCat("promtool check rules ", kSource,
                               "/deploy/prometheus/rules/rnnserve_recording.yml ", kSource,
                               "/deploy/prometheus/rules/rnnserve_alerts.yml"),
                  &out),
            0)
      << out;
}

TEST(PrometheusDeployTest, RuleUnitTestsPass) {
  if (!HavePromtool()) GTEST_SKIP() << kNoPromtool;
  std::string out;
  EXPECT_EQ(
      Shell("promtool test rules " + kSource + "/deploy/prometheus/tests/rnnserve_rules_test.yml",
            &out),
      0)
      << out;
}

TEST(PrometheusDeployTest, ExpositionPassesPromtoolCheckMetrics) {
  if (!HavePromtool()) GTEST_SKIP() << kNoPromtool;
  ServerMetrics m;
  ModelMetrics& model = LoadLstm(&m);
  model.RequestStarted();
  model.RequestFinished("Predict", absl::StatusCode::kOk, absl::Milliseconds(3));
  model.RecordBatch({.engine = "cpu",
                     .batch_size = 4,
                     .real_timesteps = 10,
                     .computed_timesteps = 16,
                     .compute = absl::Milliseconds(2)});
  m.ModelLoadFailed("broken", 0);
  const std::string path =
      (std::filesystem::temp_directory_path() / absl::StrCat("metrics_", getpid(), ".txt"))
          .string();
  std::ofstream(path) << m.ExpositionText();
  std::string out;
  const int rc = Shell("promtool check metrics < " + path, &out);
  std::filesystem::remove(path);
  EXPECT_EQ(rc, 0) << out;
}

// Every rnnserve name a dashboard query uses is exported (a family, or its _bucket, _sum or
// _count series) or recorded by the recording rules.
TEST(GrafanaDashboardTest, QueriesUseOnlyExportedOrRecordedNames) {
  std::set<std::string> known;
  {
    // prometheus-cpp writes a family once it has a series: a loaded model gives every family one.
    ServerMetrics m;
    LoadLstm(&m);
    const std::string text = m.ExpositionText();
    const std::regex type_line("# TYPE (\\S+) (\\S+)");
    for (std::sregex_iterator it(text.begin(), text.end(), type_line), end; it != end; ++it) {
      const std::string name = (*it)[1];
      known.insert(name);
      if ((*it)[2] == "histogram") {
        for (const char* s : {"_bucket", "_sum", "_count"}) known.insert(name + s);
      }
    }
    const std::string rules = ReadFile(kSource + "/deploy/prometheus/rules/rnnserve_recording.yml");
    const std::regex record("record: (\\S+)");
    for (std::sregex_iterator it(rules.begin(), rules.end(), record), end; it != end; ++it) {
      known.insert((*it)[1]);
    }
  }
  const std::string path = kSource + "/deploy/grafana/dashboards/rnnserve.json";
  const nlohmann::json dashboard = nlohmann::json::parse(ReadFile(path));
  int queries = 0;
  const std::regex name("\\b(rnnserve[_:][a-z0-9_:]*|process_[a-z_]+)");
  for (const auto& panel : dashboard.at("panels")) {
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel["targets"]) {
      const std::string expr = target.at("expr");
      ++queries;
      for (std::sregex_iterator it(expr.begin(), expr.end(), name), end; it != end; ++it) {
        EXPECT_TRUE(known.count((*it)[1]))
            << (*it)[1] << " in panel '" << panel["title"] << "' is neither exported nor recorded";
      }
    }
  }
  EXPECT_GE(queries, 8);
}

}  // namespace
}  // namespace rnnserve::server::metrics
