#pragma once

// DirectScheduler: runs each request alone, without batching (a model whose config.pbtxt asks
// for no dynamic_batching or cellular_batching, or has max_batch_size 0).
//
// PARAMETERS AND BEHAVIOR
//   Schedule() runs a request on the next free instance, in engine calls of at most
//   max_batch_size sequences (0: the whole request in one call); their outputs, and the final
//   states when the request asks for them, are joined back in row order. Each call is a turn
//   (ORDER below): between two calls of a large request the instance goes to whoever is next,
//   so a request of many rows delays another caller's by one call, not by all of them.
//   - where: on the calling thread when its caller waits for the answer there
//     (BatchRequest::caller_blocks), or allows it (may_run_on_caller) and an instance is idle;
//     otherwise on one of the scheduler's threads (one per instance), which wait for a free
//     instance.
//   - ORDER (fair_queue.h): requests that wait, for a thread or for an instance, are served
//     with their callers (BatchRequest::caller) taking turns, one request each, a caller that
//     had none waiting first; one caller's requests in arrival order. So a caller's flood of
//     requests queues behind its own requests, not in front of another caller's. Priority
//     plays no part (Triton's priority levels belong to dynamic batching).
//   - deadlines: a request whose deadline passes before it gets an instance fails with
//     DEADLINE_EXCEEDED and costs no compute; one already past it is refused by Schedule().
//   - cancellation (abandon_watch.h): a request whose caller gave up (BatchRequest::cancelled,
//     or its deadline) while it waits for a thread or an instance is answered CANCELLED (or
//     DEADLINE_EXCEEDED) within kAbandonPollInterval and never runs; once running, its engine
//     call stops at the next step boundary (engine::Batch::stop) and frees the instance.
//   - faults: the rule of instance_pool.h (an instance that fails its probe leaves rotation).
//   - every engine call is reported to the observer (BatchStats: one request; the request's
//     wait for its instance in queue_durations of its first call).
//
// THREADS AND SHUTDOWN
//   Thread-safe. Drain() stops taking requests (UNAVAILABLE) and returns when every request it
//   took has been answered. The destructor answers requests that wait for a thread with
//   UNAVAILABLE, waits for the running ones and joins its threads; it must not run on one of
//   them.
//
// LATENCY BOUND
//   A request starts when an instance frees: at most the engine time of the calls running
//   (one per instance) and of those ahead of it in ORDER: one call per other caller with
//   requests waiting, and its own caller's earlier requests.
//
// RECOMMENDED USE
//   Models served to few concurrent clients, large models whose single call already fills the
//   machine, and models that cannot be batched (time-major exports: max_batch_size 0).

#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "server/batching/abandon_watch.h"
#include "server/batching/async_runner.h"
#include "server/batching/batch_request.h"
#include "server/batching/fair_queue.h"
#include "server/batching/instance_pool.h"
#include "server/batching/scheduler.h"

namespace rnnserve::server::batching {

struct DirectSchedulerOptions {
  std::string model_name;  // in errors and the log
  // The most sequences per engine call; 0: a request runs in one call, whatever its size.
  // Must not be negative.
  int max_batch_size = 0;
};

class DirectScheduler final : public Scheduler {
 public:
  // The instances must outlive the scheduler. `probe` checks an instance after an engine fault
  // (instance_pool.h). INVALID_ARGUMENT for bad options or no instances.
  static absl::StatusOr<std::unique_ptr<DirectScheduler>> Create(
      const DirectSchedulerOptions& options, std::vector<engine::CompiledModel*> instances,
      InstancePool::Probe probe);
  ~DirectScheduler() override;

  SchedulerKind kind() const override { return SchedulerKind::kDirect; }
  absl::Status Schedule(std::unique_ptr<BatchRequest>* request) override;
  void Drain() override;
  bool IsWorkerThread() const override;

  // Called after every engine call, on the thread that made it; set before the first request.
  void SetObserver(BatchObserver observer) { observer_ = std::move(observer); }
  // Requests waiting for an instance now (their calls' turns, ORDER).
  int64_t waiting_for_instance() const { return pool_.waiting(); }
  // Runs a batch on instance `instance` and nothing else, waiting while a request holds it
  // (checks of one instance, e.g. each GPU of a multi-GPU model). Not reported.
  absl::Status RunOn(int instance, const engine::Batch& batch,
                     std::vector<engine::Tensor>* outputs);

 private:
  DirectScheduler(const DirectSchedulerOptions& options,
                  std::vector<engine::CompiledModel*> instances, InstancePool::Probe probe);
  // Runs the request to its answer and calls its `done`.
  void Run(std::unique_ptr<BatchRequest> request, absl::Time queued);
  // The request's engine calls, the first on *instance; each later one gives the instance back
  // and waits for its turn again (*instance: the one held at the end, -1 when none is). The
  // first call reports `waited`.
  absl::StatusOr<std::vector<engine::Tensor>> RunCalls(int* instance, const BatchRequest& r,
                                                       absl::Duration waited);
  // Gives *instance back and takes the next one in ORDER for `r`; *instance is -1 on failure
  // (r's deadline passed, or its caller gave up).
  absl::Status NextTurn(int* instance, const BatchRequest& r);
  absl::Status Call(int instance, const engine::Batch& batch, std::vector<engine::Tensor>* out,
                    std::optional<absl::Duration> waited);
  // One request fewer in flight; wakes Drain.
  void Finished();
  // A request waiting for a runner thread, answered by whichever of the thread and the watch
  // takes it first.
  struct Waiting;
  void Post(std::unique_ptr<BatchRequest> request, absl::Time queued);
  // Takes `which` out of posted_ (it gave up), or, when null, the one whose turn it is.
  std::shared_ptr<Waiting> TakePosted(const Waiting* which);
  // Abandoned's answer `why` (OK stays OK) naming the model, with `what` appended.
  absl::Status Explained(const absl::Status& why, absl::string_view what) const;

  const DirectSchedulerOptions options_;
  const std::vector<engine::CompiledModel*> instances_;
  InstancePool pool_;
  BatchObserver observer_;  // set before the first request

  absl::Mutex mu_;
  // Requests taken and not yet answered, running on a caller's thread or waiting for or
  // running on a runner's.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Requests handed to the runner, in ORDER; each runner task takes the head.
  FairQueue<std::shared_ptr<Waiting>> posted_ ABSL_GUARDED_BY(mu_){1};
  // Declared last: stop (answering what they have not started) before the rest is destroyed.
  std::unique_ptr<AsyncRunner> runner_;
  std::unique_ptr<AbandonWatch> watch_;
};

}  // namespace rnnserve::server::batching
