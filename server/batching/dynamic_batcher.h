#pragma once

// DynamicBatcher: the per-model scheduler that groups concurrent requests of any lengths into
// engine batches and runs them on the model's instances.
//
// PARAMETERS AND BEHAVIOR
//   A request (batch_request.h) is B sequences with per-sequence lengths, a deadline, a
//   priority and a completion callback. Schedule() queues it; each instance has one worker
//   thread that, when its instance is free, forms the next due batch and runs it. The rules
//   (batch_former.h):
//   - work-conserving (the default): a free instance forms a batch from what is queued at
//     once; requests queue only while every instance is busy, and the next free instance
//     takes all that fit one batch.
//   - max_batch_size: the most sequences per engine call. A larger request is split across
//     batches and its rows reassembled in order.
//   - with wait_when_idle (Triton's rule), a free instance waits: preferred_batch_sizes: a
//     batch is formed as soon as it reaches one of them (the largest it reaches), or when it is
//     full; max_queue_delay_us: otherwise the head of the queue waits at most this long for
//     others to join; then its batch is formed with what there is.
//   - max_queue_size: Schedule() answers RESOURCE_EXHAUSTED while this many requests queue.
//   - deadlines: a request's deadline, shortened to default_timeout_us after it queued when
//     that is set. A request whose deadline comes while any of its rows waits fails with
//     DEADLINE_EXCEEDED and costs no compute; one already past it is refused by Schedule().
//   - cancellation (abandon_watch.h): a request whose caller gave up (BatchRequest::cancelled,
//     or its own deadline) is answered CANCELLED or DEADLINE_EXCEEDED within
//     kAbandonPollInterval, queued or running: it leaves the queue, its rows in a running batch
//     are dropped (not delivered), and a batch none of whose requests is still wanted stops at
//     the next step boundary (engine::Batch::stop).
//   - fairness (fair_queue.h, request_queue.h): callers (BatchRequest::caller) take turns, a
//     request each: the head of the queue is the next caller's, and a batch is filled in that
//     order, so a caller's flood queues behind its own requests, not in front of another
//     caller's. A caller that had nothing queued is served next.
//   - priority_levels: within a caller's turns level 1 is served first; a caller's level waits
//     while a higher one of the same caller has rows queued (under its sustained
//     higher-priority load, its lower levels starve: that is the point). Priority does not
//     take other callers' turns.
//   - lengths: requests of different lengths share a batch; the time axis is padded to the
//     batch's longest and every sequence keeps its true length (batch_assembly.h). With
//     max_computed_steps_ratio r > 0, a batch's sequences x longest length stays <= r x the
//     sum of its lengths, so long and short sequences run in separate batches (step_budget.h).
//   - stateful chunks: a request may carry initial states and ask for final states
//     (engine::Batch); chunks of different sequences that arrive together run as one batch,
//     stacked row by row, and each gets its own rows of the final states. Requests giving
//     initial states for different layers do not share a batch.
//   - each request gets exactly its own rows back. If the engine fails a batch of several
//     requests, each request is run again alone, so a bad request fails alone.
//
// THREADS AND SHUTDOWN
//   One worker per instance, each running only its own instance, so an instance is never used
//   by two threads at once; CPU instances should be compiled with cores / instances threads.
//   Drain() stops taking requests and runs everything queued at once (no delay); the
//   destructor fails whatever is still queued with UNAVAILABLE, waits for running batches and
//   joins the workers. A done callback runs on a worker thread, or on the thread in Drain or
//   the destructor; it must not call back into the batcher.
//
// LATENCY BOUND
//   A request at the head of the queue (the next caller's turn, its highest non-empty level)
//   starts when an instance is free (the batches ahead of it), plus max_queue_delay_us with
//   wait_when_idle. Requests
//   whose lengths do not fit the head's batch wait for a later one; each is the head in turn.
//   Deadlines are checked whenever a worker looks at the queue: at the latest when the
//   earliest deadline comes if a worker is idle, else when a worker frees.
//
// RECOMMENDED USE
//   Models served to many concurrent clients, where a batch of N costs much less than N
//   single runs (GPUs always; the CPU engine for small hidden sizes). Work-conserving, a
//   single client with sequential requests pays only a thread handoff each way.

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "server/batching/abandon_watch.h"
#include "server/batching/batch_former.h"
#include "server/batching/batch_request.h"
#include "server/batching/batcher_options.h"
#include "server/batching/clock.h"
#include "server/batching/instance_pool.h"
#include "server/batching/scheduler.h"

namespace rnnserve::server::batching {

class DynamicBatcher final : public Scheduler {
 public:
  // One worker per instance. The instances and the clock must outlive the batcher; each
  // instance is used only by its worker. INVALID_ARGUMENT for bad options or no instances.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(
      const DynamicBatcherOptions& options, std::vector<engine::CompiledModel*> instances,
      const Clock* clock = RealClock());
  ~DynamicBatcher() override;

  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues *request and takes it on success; on failure *request stays with the caller and
  // `done` is not called. Errors: those of BatchFormer::Add, and UNAVAILABLE after Drain().
  // With run_on_caller_when_idle (and the request's may_run_on_caller), when an instance is
  // free the batch (this request and any queued with it) runs on the calling thread before
  // Schedule returns, and `done` is called there: no hand-off to a worker and back.
  absl::Status Schedule(std::unique_ptr<BatchRequest>* request) override;
  SchedulerKind kind() const override { return SchedulerKind::kDynamic; }

  // Stops taking requests (UNAVAILABLE), runs what is queued without waiting for the delay,
  // and returns when every queued request has finished.
  void Drain() override;

  // Called after every engine call, on the worker thread; replaces the previous observer.
  void SetObserver(BatchObserver observer);
  // Checks an instance after an engine fault, on its worker thread. Without one, faults are
  // taken as transient and the instance keeps running.
  void SetInstanceProbe(InstancePool::Probe probe);
  BatcherCounters counters() const;
  // Whether the calling thread is one of the batcher's workers.
  bool IsWorkerThread() const override;
  const DynamicBatcherOptions& options() const { return options_; }

 private:
  DynamicBatcher(const DynamicBatcherOptions& options,
                 std::vector<engine::CompiledModel*> instances, const Clock* clock);
  void Work(int instance);
  // Fails `expired`, runs `batch` (if any) on `instance`, which the caller has claimed, and
  // gives the instance back. Returns false when the instance failed its probe and left.
  bool RunClaimed(int instance, std::vector<std::shared_ptr<QueuedRequest>> expired,
                  const std::optional<FormedBatch>& batch);
  // Runs the batch; returns the first engine fault of its engine calls, or OK.
  absl::Status Execute(int instance, const FormedBatch& batch);
  // After an engine fault: whether the probe (if one is set) still passes on `instance`.
  bool ProbePasses(int instance, const absl::Status& fault);
  // Takes the worker of `instance` out after `fault`; the last one fails what is queued.
  void Retire(int instance, const absl::Status& fault);
  // Runs the rows on the instance and delivers or fails them; returns the engine's status.
  struct RowOutcome;
  absl::Status RunRows(int instance, absl::Span<const BatchRow> rows, RowOutcome* outcome);
  // Watches `request` (abandon_watch.h) until it finishes.
  void WatchRequest(const std::shared_ptr<QueuedRequest>& request);

  const DynamicBatcherOptions options_;
  const std::vector<engine::CompiledModel*> instances_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  BatchFormer former_ ABSL_GUARDED_BY(mu_);
  // Bumped on every change a sleeping worker must look at (a new request, a batch taken,
  // draining, stopping).
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // refuse new requests, flush the queue
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // workers exit after their current batch
  int running_batches_ ABSL_GUARDED_BY(mu_) = 0;
  // Per instance: a batch runs on it (by its worker, or by a caller of Schedule); it left
  // rotation after a fault.
  std::vector<char> claimed_ ABSL_GUARDED_BY(mu_);
  std::vector<char> retired_ ABSL_GUARDED_BY(mu_);
  int live_workers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status retired_status_ ABSL_GUARDED_BY(mu_);  // Schedule's answer once none is live
  BatcherCounters counters_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex observer_mu_;
  BatchObserver observer_ ABSL_GUARDED_BY(observer_mu_);
  InstancePool::Probe probe_ ABSL_GUARDED_BY(observer_mu_);

  std::vector<std::thread> workers_;  // started in Create, joined in the destructor
  // Answers queued and running requests whose caller gave up; destroyed first.
  std::unique_ptr<AbandonWatch> watch_ = std::make_unique<AbandonWatch>();
};

}  // namespace rnnserve::server::batching
