// What recording one request costs in server/metrics: the calls the request path makes for one
// unbatched KServe request (the interceptor's RequestStarted/RequestFinished, the servable's
// Find, QueueEntered/QueueLeft and RecordBatch: 3 histogram observations, 3 counter and 4 gauge
// updates), from T threads at once on one model version's series, in ns per request.
//
// Written against ServerMetrics' public API only, so one source compiles against any version of
// the library; bench/results/metrics-histogram-2026-11-23.md compiles it against two and says how.
//   metrics_record_bench [THREADS (1)] [REQUESTS_PER_THREAD (2000000)] [REPEATS (5)]
// Prints the best of REPEATS (the least disturbed by other load on the machine).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "server/metrics/server_metrics.h"

namespace metrics = rnnserve::server::metrics;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const long requests = argc > 2 ? std::atol(argv[2]) : 2000000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  metrics::ServerMetrics m;
  metrics::ModelLoadInfo info;
  info.name = "tiny_lstm";
  info.version = 1;
  info.engines = {"cpu"};
  info.memory_bytes = {4096};
  m.ModelLoaded(info);
  double best_ns = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&m, requests] {
        for (long i = 0; i < requests; ++i) {
          metrics::ModelMetrics* model = m.Find("tiny_lstm", 0);
          model->RequestStarted();
          model->QueueEntered();
          model->QueueLeft(absl::Microseconds(3 + i % 50));
          model->RecordBatch({.engine = "cpu",
                              .batch_size = 1,
                              .real_timesteps = 10,
                              .computed_timesteps = 10,
                              .compute = absl::Microseconds(40 + i % 100)});
          model->RequestFinished("ModelInfer", absl::StatusCode::kOk,
                                 absl::Microseconds(60 + i % 200));
        }
      });
    }
    for (auto& t : pool) t.join();
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    best_ns = std::min(best_ns, ns / static_cast<double>(requests * threads));
  }
  // Wall time per request over all threads: with T threads on T free cores, contention shows
  // as a rise over the one-thread figure.
  std::printf("threads %d: %.1f ns per request (best of %d)\n", threads, best_ns, repeats);
  return 0;
}
