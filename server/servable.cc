// Servable's serving: Run with and without the dynamic batcher, RunOn, and the fault probe.
// Loading is in servable_load.cc.

#include "server/servable.h"

#include <algorithm>
#include <future>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_util.h"
#include "server/log.h"
#include "server/metrics/batch_timesteps.h"
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
  return (batcher_ != nullptr && batcher_->IsWorkerThread()) ||
         (cellular_ != nullptr && cellular_->IsWorkerThread()) ||
         (runner_ != nullptr && runner_->IsRunnerThread());
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

absl::Status Servable::RunOnInstance(const engine::Batch& batch, std::vector<engine::Tensor>* out,
                                     absl::Time deadline) const {
  const absl::Time queued = absl::Now();
  recorder_.Queued();
  const absl::StatusOr<int> acquired = pool_->Acquire(deadline);
  if (!acquired.ok()) {
    recorder_.LeftQueue(absl::Now() - queued);
    return acquired.status();
  }
  const int index = *acquired;
  const absl::Time started = absl::Now();
  recorder_.LeftQueue(started - queued);
  const absl::Status s = instances_[index]->Run(batch, out);
  const absl::Duration compute = absl::Now() - started;
  NoteComputeTime(compute);
  // The report the batcher makes for an engine call (the wait is recorded above).
  const metrics::Timesteps steps = metrics::CountTimesteps(batch);
  recorder_.Observe({.instance = index,
                     .sequences = steps.batch_size,
                     .requests = 1,
                     .real_steps = steps.real,
                     .computed_steps = steps.computed,
                     .compute = compute,
                     .status = s});
  pool_->Release(index, s);
  return s;
}

absl::Status Servable::RunOn(int instance, const engine::Batch& batch,
                             std::vector<engine::Tensor>* outputs) const {
  if (instance < 0 || instance >= static_cast<int>(instances_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name(), "' has ", instances_.size(),
                                                   " instances; asked for ", instance));
  }
  if (batcher_ != nullptr || cellular_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name(), "' batches dynamically: its batcher's workers own the instances"));
  }
  if (absl::Status s = pool_->AcquireInstance(instance); !s.ok()) return s;
  const absl::Status s = instances_[instance]->Run(batch, outputs);
  pool_->Release(instance, s);
  return s;
}

void Servable::Schedule(engine::Batch batch, const RunOptions& options, RunDone done,
                        bool may_run_on_caller, bool hand_over) const {
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  // The dynamic batcher's observer reports the queue wait of requests whose rows start; a
  // request that leaves the queue without starting (deadline, unloading, refused) is reported
  // here. The cellular scheduler reports its own.
  const bool queue_metrics = cellular_ == nullptr;
  const absl::Time queued = absl::Now();
  auto left_queue = [this, queued, queue_metrics] {
    if (queue_metrics) recorder_.LeftQueue(absl::Now() - queued);
  };
  auto request = std::make_unique<batching::BatchRequest>();
  request->batch = std::move(batch);
  request->deadline = options.deadline;
  request->priority = options.priority;
  request->cancelled = options.cancelled;
  request->may_run_on_caller = may_run_on_caller;
  // Answered on the scheduling thread only when that thread ran the batch itself (or could
  // not queue it); any other thread (a worker, or another caller that ran a batch holding this
  // request) hands the answer over, so that it is not building and sending every response of
  // its batch one after another.
  batching::AsyncRunner* const completions = hand_over ? options_.completions : nullptr;
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
  const absl::Status s =
      cellular_ != nullptr ? cellular_->Schedule(&request) : batcher_->Schedule(&request);
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
  if (cellular_ != nullptr || batcher_ != nullptr) {
    Schedule(std::move(batch), options, std::move(done),
             /*may_run_on_caller=*/RecentCallsAreShort(), /*hand_over=*/true);
    return;
  }
  auto run = [this](const engine::Batch& batch, const RunOptions& options, RunDone& done) {
    std::vector<engine::Tensor> outputs;
    const absl::Status s = Run(batch, &outputs, options);
    async_running_.fetch_sub(1, std::memory_order_relaxed);
    if (s.ok()) {
      done(std::move(outputs));
    } else {
      done(s);
    }
  };
  // An idle instance and short calls: run here. Otherwise the runner's threads wait for the
  // instances.
  const int running = async_running_.fetch_add(1, std::memory_order_relaxed);
  if (runner_ == nullptr ||
      (running < static_cast<int>(instances_.size()) && RecentCallsAreShort())) {
    run(batch, options, done);
    return;
  }
  runner_->Post(
      [this, run, batch = std::move(batch), options, done = std::move(done)](bool start) mutable {
        if (!start) {
          async_running_.fetch_sub(1, std::memory_order_relaxed);
          done(absl::UnavailableError(
              absl::StrCat("model '", name(), "' is unloading; the request did not run; retry")));
          return;
        }
        run(batch, options, done);
      });
}

absl::Status Servable::Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                           const RunOptions& options) const {
  if (cellular_ != nullptr || batcher_ != nullptr) {
    using Result = absl::StatusOr<std::vector<engine::Tensor>>;
    std::promise<Result> promise;
    std::future<Result> answer = promise.get_future();
    Schedule(
        batch, options, [&promise](Result result) { promise.set_value(std::move(result)); },
        /*may_run_on_caller=*/true, /*hand_over=*/false);
    Result result = answer.get();
    if (!result.ok()) return result.status();
    *outputs = std::move(*result);
    return absl::OkStatus();
  }
  if (absl::Now() > options.deadline) {
    return absl::DeadlineExceededError("deadline passed before the request ran");
  }
  const int64_t B = batch.inputs.empty() ? 0 : batch.inputs[0].dim(0);
  const int64_t limit = max_batch_size() > 0 ? max_batch_size() : B;
  if (B <= limit) return RunOnInstance(batch, outputs, options.deadline);
  std::vector<std::vector<engine::Tensor>> parts;
  std::vector<std::map<std::string, std::vector<engine::Tensor>>> part_states;
  for (int64_t begin = 0; begin < B; begin += limit) {
    std::vector<engine::Tensor> out;
    engine::Batch part = SliceBatch(batch, begin, std::min(B, begin + limit));
    part_states.emplace_back();
    if (batch.final_states) part.final_states = &part_states.back();
    if (auto s = RunOnInstance(part, &out, options.deadline); !s.ok()) return s;
    parts.push_back(std::move(out));
  }
  outputs->clear();
  for (size_t o = 0; o < parts[0].size(); ++o) {
    std::vector<engine::Tensor> pieces;
    for (auto& p : parts) pieces.push_back(std::move(p[o]));
    outputs->push_back(ConcatRows(pieces));
  }
  if (batch.final_states) {
    batch.final_states->clear();
    for (const auto& [layer, states] : part_states[0]) {
      for (size_t i = 0; i < states.size(); ++i) {
        std::vector<engine::Tensor> pieces;
        for (auto& p : part_states) pieces.push_back(std::move(p[layer][i]));
        (*batch.final_states)[layer].push_back(ConcatRows(pieces));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
