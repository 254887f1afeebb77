#pragma once

// How CPU instances share the machine's cores. Each instance has one worker thread that runs
// its engine; instances run at once, so each instance's engine gets an equal share of the
// cores and together they do not oversubscribe them. And whether a thread is one of a
// scheduler's own.

#include <algorithm>
#include <thread>
#include <vector>

namespace rnnserve::server::batching {

// Engine threads for each CPU instance: `configured_threads` when > 0 (the config's
// optimization.cpu_threads: honoured as written, even past the share), else
// cores / instances, at least 1.
inline int CpuThreadsPerInstance(int cores, int instances, int configured_threads) {
  if (configured_threads > 0) return configured_threads;
  return std::max(1, std::max(1, cores) / std::max(1, instances));
}

// Whether the calling thread is one of `threads` (a scheduler's workers, fixed once started).
inline bool CallingThreadIsOneOf(const std::vector<std::thread>& threads) {
  return std::any_of(threads.begin(), threads.end(),
                     [](const std::thread& t) { return t.get_id() == std::this_thread::get_id(); });
}

}  // namespace rnnserve::server::batching
