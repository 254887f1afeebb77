#pragma once

// Scheduler: the one interface a Servable runs requests through. A servable holds exactly one,
// chosen once at load by MakeScheduler (servable_load.cc):
//   - kDirect   (direct_scheduler.h): no batching; each request runs alone on a free instance,
//                split into engine calls of at most max_batch_size sequences.
//   - kDynamic  (dynamic_batcher.h): concurrent requests share engine calls.
//   - kCellular (cellular_scheduler.h): step-level batching; sequences join and leave the
//                running batch between chunks of steps.
// Each implementation's header states its behaviour, options and latency bound.
//
// The contract common to all:
//   - Schedule() takes *request on success (and later calls its `done` exactly once, outside
//     the scheduler's locks); on failure *request stays with the caller and `done` is not
//     called. A synchronous run is a wait on this asynchronous one (Servable::Run).
//   - Drain() stops taking requests (UNAVAILABLE) and returns when every request it took has
//     been answered.
//   - A `done` callback must not call back into the scheduler.

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "server/batching/batch_request.h"

namespace rnnserve::server::batching {

enum class SchedulerKind { kDirect, kDynamic, kCellular };

// The name model metadata reports: "none", "dynamic" or "cellular".
std::string_view SchedulerKindName(SchedulerKind kind);

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  virtual SchedulerKind kind() const = 0;
  virtual absl::Status Schedule(std::unique_ptr<BatchRequest>* request) = 0;
  virtual void Drain() = 0;
  // Whether the calling thread is one the scheduler runs requests on.
  virtual bool IsWorkerThread() const = 0;
  // Whether the scheduler reports each request's queue wait in BatchStats::queue_durations
  // (the direct and dynamic schedulers). The step-level scheduler reports time to first step
  // through its own chunk statistics instead.
  virtual bool reports_queue_waits() const { return true; }
};

}  // namespace rnnserve::server::batching
