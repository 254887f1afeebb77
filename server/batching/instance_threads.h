#pragma once

// How CPU instances share the machine's cores. Each instance has one worker thread that runs
// its engine; instances run at once, so each instance's engine gets an equal share of the
// cores and together they do not oversubscribe them.

#include <algorithm>

namespace rnnserve::server::batching {

// Engine threads for each CPU instance: `configured_threads` when > 0 (the config's
// optimization.cpu_threads: honoured as written, even past the share), else
// cores / instances, at least 1.
inline int CpuThreadsPerInstance(int cores, int instances, int configured_threads) {
  if (configured_threads > 0) return configured_threads;
  return std::max(1, std::max(1, cores) / std::max(1, instances));
}

}  // namespace rnnserve::server::batching
