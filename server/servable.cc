// Servable's serving: Run and RunAsync through the model's scheduler, RunOn, and the fault
// probe.
// Loading is in servable_load.cc.

#include "server/servable.h"

#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_layout.h"
#include "server/batching/direct_scheduler.h"
#include "server/limits/caller_identity.h"
#include "server/log.h"
#include "server/model_probe.h"

namespace rnnserve::server {

std::shared_ptr<const Servable> ShareServable(std::unique_ptr<Servable> servable) {
  return std::shared_ptr<const Servable>(servable.release(), [](const Servable* s) {
    if (s->IsServingThread()) {
      std::thread([s] { delete s; }).detach();
    } else {
      delete s;
    }
  });
}

bool Servable::IsServingThread() const {
  return scheduler_ != nullptr && scheduler_->IsWorkerThread();
}

bool Servable::HasRecurrentLayer(const std::string& name) const {
  for (const engine::Layer& l : model_.layers) {
    if (l.name == name && std::holds_alternative<engine::RecurrentSpec>(l.spec)) return true;
  }
  return false;
}

absl::Status Servable::ProbeAfterFault(int instance, const absl::Status& fault) const {
  std::vector<engine::Tensor> out;
  const absl::Status probe = instances_[instance]->Run(ProbeBatch(inputs_, 1, 2), &out);
  const std::string what = absl::StrCat("model ", name(), " v", version_, " instance ", instance,
                                        ": engine fault (", fault.message(), "); ");
  if (probe.ok()) {
    LogWarning(absl::StrCat(what, "a test batch still runs, so it stays in rotation"));
  } else {
    LogError(absl::StrCat(what, "a test batch fails too (", probe.message(),
                          "), so it leaves rotation"));
  }
  return probe;
}

absl::Status Servable::RunOn(int instance, const engine::Batch& batch,
                             std::vector<engine::Tensor>* outputs) const {
  if (scheduler_kind() != batching::SchedulerKind::kDirect) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name(), "' batches dynamically: its batcher's workers own the instances"));
  }
  auto* direct = static_cast<batching::DirectScheduler*>(scheduler_.get());
  if (!moves_batch_axes_) return direct->RunOn(instance, batch, outputs);
  engine::Batch batch_first = batch;
  ToBatchFirst(input_batch_axes_, &batch_first);
  const absl::Status s = direct->RunOn(instance, batch_first, outputs);
  if (s.ok()) FromBatchFirst(output_batch_axes_, outputs);
  return s;
}

void Servable::Schedule(engine::Batch batch, const RunOptions& options, RunDone done,
                        ScheduleMode mode) const {
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  // The schedulers and the compiled model work batch first; the caller has the file's layout.
  if (moves_batch_axes_) {
    ToBatchFirst(input_batch_axes_, &batch);
    done = [this, done = std::move(done)](Result result) mutable {
      if (result.ok()) FromBatchFirst(output_batch_axes_, &*result);
      done(std::move(result));
    };
  }
  // The scheduler's observer reports the queue wait of requests whose rows start; a request
  // that leaves the queue without starting (deadline, unloading, refused) is reported here.
  // The cellular scheduler reports its own.
  const bool queue_metrics = scheduler_->reports_queue_waits();
  const absl::Time queued = absl::Now();
  auto left_queue = [this, queued, queue_metrics] {
    if (queue_metrics) recorder_.LeftQueue(absl::Now() - queued);
  };
  auto request = std::make_unique<batching::BatchRequest>();
  request->batch = std::move(batch);
  request->deadline = options.deadline;
  request->priority = options.priority;
  request->caller = limits::ShareKey(options.caller);  // whose turn it takes in the queue
  request->cancelled = options.cancelled;
  request->allocate_outputs = options.allocate_outputs;
  request->may_run_on_caller = mode.may_run_on_caller;
  request->caller_blocks = mode.caller_blocks;
  // Answered on the scheduling thread only when that thread ran the batch itself (or could
  // not queue it); any other thread (a worker, or another caller that ran a batch holding this
  // request) hands the answer over, so that it is not building and sending every response of
  // its batch one after another.
  batching::AsyncRunner* const completions = mode.hand_over ? options_.completions : nullptr;
  const std::thread::id caller = std::this_thread::get_id();
  request->done = [left_queue, completions, caller, done = std::move(done)](Result result) mutable {
    if (absl::IsDeadlineExceeded(result.status()) || absl::IsUnavailable(result.status())) {
      left_queue();
    }
    if (completions == nullptr || std::this_thread::get_id() == caller) {
      done(std::move(result));
      return;
    }
    // Run whether or not the runner still runs tasks (then on the thread stopping it).
    completions->Post([done = std::move(done), result = std::move(result)](bool) mutable {
      done(std::move(result));
    });
  };
  if (queue_metrics) recorder_.Queued();
  const absl::Status s = scheduler_->Schedule(&request);
  if (s.ok()) return;
  // Not queued: the request is still ours, and `done` has not run.
  if (!absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s)) left_queue();
  request->done(s);
}

void Servable::NoteComputeTime(absl::Duration compute) const {
  const int64_t ns = absl::ToInt64Nanoseconds(compute);
  const int64_t old = recent_compute_ns_.load(std::memory_order_relaxed);
  recent_compute_ns_.store(old + (ns - old) / 8, std::memory_order_relaxed);
}

bool Servable::RecentCallsAreShort() const {
  return run_on_caller_budget_ > absl::ZeroDuration() &&
         recent_compute_ns_.load(std::memory_order_relaxed) <=
             absl::ToInt64Nanoseconds(run_on_caller_budget_);
}

void Servable::RunAsync(engine::Batch batch, const RunOptions& options, RunDone done) const {
  // The direct scheduler answers one request per engine call: nothing to hand over.
  const bool hand_over = scheduler_kind() != batching::SchedulerKind::kDirect;
  Schedule(std::move(batch), options, std::move(done),
           {.may_run_on_caller = RecentCallsAreShort(), .hand_over = hand_over});
}

absl::Status Servable::Run(engine::Batch batch, std::vector<engine::Tensor>* outputs,
                           const RunOptions& options) const {
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  std::promise<Result> promise;
  std::future<Result> answer = promise.get_future();
  Schedule(std::move(batch), options,
           [&promise](Result result) { promise.set_value(std::move(result)); },
           {.may_run_on_caller = true, .caller_blocks = true});
  Result result = answer.get();
  if (!result.ok()) return result.status();
  *outputs = std::move(*result);
  return absl::OkStatus();
}

}  // namespace rnnserve::server
