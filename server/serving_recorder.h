#pragma once

// ServingRecorder: the one place a servable records its serving metrics.
//
// Both run paths report here in the dynamic batcher's terms (batching::BatchStats): the
// batcher's observer after each engine call, and Servable::Run without a batcher after each
// engine call on the caller's thread. Per request: Queued() when it joins the queue, then one
// LeftQueue(): either through the queue_durations of the BatchStats of the engine call its
// first rows run in (the batcher), or called directly when it takes an instance on the
// caller's thread or leaves the queue without starting (deadline, full queue, unloading).
//
// It records nothing until Attach(), which the servable calls at the end of its load, before
// any request can reach it: the load's probes and warm-up are not requests.
//
// THREADS: the recording calls are safe from any thread (ModelMetrics is lock-free); Attach()
// is called once, before the recorder is shared.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/batching/batch_request.h"
#include "server/batching/cellular_scheduler.h"
#include "server/metrics/server_metrics.h"

namespace rnnserve::server {

class ServingRecorder {
 public:
  // `metrics`: the version's recorder (may be null: nothing is recorded). `engines`: the
  // engine name of each instance, indexed by BatchStats::instance.
  void Attach(metrics::ModelMetrics* metrics, std::vector<std::string> engines);

  // A request joins the queue (queue depth +1).
  void Queued() const;
  // A request leaves the queue after `waited` (queue depth -1, its wait observed).
  void LeftQueue(absl::Duration waited) const;
  // One engine call: the waits of the requests that started in it (queue depth -1 each), and,
  // when it succeeded, its batch size, timesteps and compute time on its instance's engine.
  void Observe(const batching::BatchStats& stats) const;
  // One chunk of step-level batching: an engine call (batch size, timesteps, compute time),
  // the chunk's own series, and `active_slots`, the slots in use on every instance now.
  // Requests of step-level batching do not pass through Queued()/LeftQueue(): their wait is
  // the time to their first step.
  void ObserveChunk(const batching::ChunkStats& stats, int64_t active_slots) const;

 private:
  metrics::ModelMetrics* metrics_ = nullptr;  // set once by Attach
  std::vector<std::string> engines_;          // per instance; set once by Attach
};

}  // namespace rnnserve::server
