#include "server/metrics/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

class ProcessCollector final : public Collectable {
 public:
  void AppendText(std::string* out) const override {
    ProcessStats s;
    if (!ReadProcessStats(&s)) return;
    const std::vector<std::string> none;
    AppendHeader("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                 "counter", out);
    AppendSample("process_cpu_seconds_total", none, none, s.cpu_seconds, out);
    AppendHeader("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", out);
    AppendSample("process_resident_memory_bytes", none, none, s.resident_bytes, out);
    AppendHeader("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", out);
    AppendSample("process_virtual_memory_bytes", none, none, s.virtual_bytes, out);
    AppendHeader("process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", "gauge", out);
    AppendSample("process_start_time_seconds", none, none, s.start_time_seconds, out);
    AppendHeader("process_open_fds", "Number of open file descriptors.", "gauge", out);
    AppendSample("process_open_fds", none, none, s.open_fds, out);
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

std::unique_ptr<Collectable> NewProcessCollector() { return std::make_unique<ProcessCollector>(); }

}  // namespace rnnserve::server::metrics
