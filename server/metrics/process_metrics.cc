#include "server/metrics/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace rnnserve::server::metrics {
namespace {

// Seconds since the epoch at boot, from /proc/stat's btime line.
double BootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric sample;
  if (type == prometheus::MetricType::Counter) {
    sample.counter.value = value;
  } else {
    sample.gauge.value = value;
  }
  return {.name = std::move(name), .help = std::move(help), .type = type, .metric = {sample}};
}

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    ProcessStats s;
    if (!ReadProcessStats(&s)) return {};
    using prometheus::MetricType;
    return {
        Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               MetricType::Counter, s.cpu_seconds),
        Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
               s.resident_bytes),
        Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
               s.virtual_bytes),
        Family("process_start_time_seconds",
               "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
               s.start_time_seconds),
        Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
               s.open_fds),
    };
  }
};

}  // namespace

bool ReadProcessStats(ProcessStats* stats) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  // The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string x; fields >> x;) f.push_back(x);
  if (f.size() < 22) return false;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // Fields (1-based, proc(5)): 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss (pages).
  stats->cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  stats->start_time_seconds = BootTime() + std::stod(f[19]) / ticks;
  stats->virtual_bytes = std::stod(f[20]);
  stats->resident_bytes = std::stod(f[21]) * page;
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  stats->open_fds = fds;
  return true;
}

std::shared_ptr<prometheus::Collectable> NewProcessCollector() {
  return std::make_shared<ProcessCollector>();
}

}  // namespace rnnserve::server::metrics
