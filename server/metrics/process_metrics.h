#pragma once

// The standard process_* metrics of Prometheus client libraries, read from /proc/self at
// scrape time: process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_start_time_seconds, process_open_fds.
// A prometheus::Collectable: register it with the exposer next to the registry
// (ServerMetrics does). Where /proc is missing (not Linux) it collects nothing.

#include <memory>

#include "prometheus/collectable.h"

namespace rnnserve::server::metrics {

std::shared_ptr<prometheus::Collectable> NewProcessCollector();

// What the collector reads; exposed for tests. False when /proc/self/stat cannot be parsed.
struct ProcessStats {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // Unix time
  double open_fds = 0;
};
bool ReadProcessStats(ProcessStats* stats);

}  // namespace rnnserve::server::metrics
