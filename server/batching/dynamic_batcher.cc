#include "server/batching/dynamic_batcher.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/batching/batch_assembly.h"
#include "server/batching/instance_threads.h"

namespace rnnserve::server::batching {

// What the engine calls of one batch did to its requests.
struct DynamicBatcher::RowOutcome {
  int64_t completed = 0;
  int64_t failed = 0;
};

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    const DynamicBatcherOptions& options, std::vector<engine::CompiledModel*> instances,
    const Clock* clock) {
  if (auto s = ValidateOptions(options); !s.ok()) return s;
  if (instances.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", options.model_name, "': the batcher needs at least one instance"));
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    if (instances[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", options.model_name, "': instance ", i, " is null"));
    }
  }
  if (clock == nullptr) return absl::InvalidArgumentError("the batcher needs a clock");
  std::unique_ptr<DynamicBatcher> batcher(new DynamicBatcher(options, std::move(instances), clock));
  for (int i = 0; i < static_cast<int>(batcher->instances_.size()); ++i) {
    batcher->workers_.emplace_back([b = batcher.get(), i] { b->Work(i); });
  }
  return batcher;
}

DynamicBatcher::DynamicBatcher(const DynamicBatcherOptions& options,
                               std::vector<engine::CompiledModel*> instances, const Clock* clock)
    : options_(options),
      instances_(std::move(instances)),
      clock_(clock),
      former_(options),
      claimed_(instances_.size(), 0),
      retired_(instances_.size(), 0),
      live_workers_(static_cast<int>(instances_.size())) {}

DynamicBatcher::~DynamicBatcher() {
  watch_.reset();
  std::vector<std::shared_ptr<QueuedRequest>> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    draining_ = true;
    ++version_;
    left = former_.TakeAll();
  }
  for (const auto& r : left) {
    r->Fail(absl::UnavailableError(absl::StrCat("model '", options_.model_name,
                                                "' is unloading; the request did not run; retry")));
  }
  for (std::thread& t : workers_) t.join();
}

absl::Status DynamicBatcher::Schedule(std::unique_ptr<BatchRequest>* request) {
  int instance = -1;
  std::vector<std::shared_ptr<QueuedRequest>> expired;
  std::optional<FormedBatch> batch;
  std::shared_ptr<QueuedRequest> queued;
  const bool watched = *request != nullptr && CanBeAbandoned(**request);
  {
    absl::MutexLock lock(&mu_);
    if (live_workers_ == 0) return retired_status_;
    if (draining_) {
      return absl::UnavailableError(
          absl::StrCat("model '", options_.model_name, "' is shutting down; retry elsewhere"));
    }
    const bool on_caller = options_.run_on_caller_when_idle && !options_.wait_when_idle &&
                           (*request)->may_run_on_caller;
    const absl::Status s = former_.Add(request, clock_->Now(), watched ? &queued : nullptr);
    if (!s.ok()) {
      if (absl::IsResourceExhausted(s)) ++counters_.requests_rejected;
      return s;
    }
    if (on_caller) {
      for (size_t i = 0; i < claimed_.size(); ++i) {
        if (!claimed_[i] && !retired_[i]) {
          instance = static_cast<int>(i);
          break;
        }
      }
      if (instance >= 0) {
        const absl::Time now = clock_->Now();
        expired = former_.TakeExpired(now);
        if (expired.empty()) batch = former_.TakeBatch(now, /*flush=*/false);
        if (expired.empty() && !batch.has_value()) {
          instance = -1;
        } else {
          claimed_[instance] = 1;
          ++running_batches_;
        }
      }
    }
    // Workers look at the queue again only when it holds something for them: a caller that
    // takes its own request to a free instance wakes no one (a wasted thread wake-up a request).
    if (instance < 0 || former_.queued_requests() > 0) ++version_;
  }
  if (queued != nullptr) WatchRequest(queued);
  if (instance >= 0) RunClaimed(instance, std::move(expired), batch);
  return absl::OkStatus();
}

void DynamicBatcher::WatchRequest(const std::shared_ptr<QueuedRequest>& request) {
  watch_->Watch([this, weak = std::weak_ptr<QueuedRequest>(request)] {
    const std::shared_ptr<QueuedRequest> r = weak.lock();
    if (r == nullptr || r->finished()) return true;
    const absl::Status why = r->FailIfAbandoned(
        clock_->Now(),
        absl::StrCat("; model '", options_.model_name,
                     "' dropped the request from its queue or its batch"),
        [this](const absl::Status& why) {
          absl::MutexLock lock(&mu_);
          ++(absl::IsCancelled(why) ? counters_.requests_cancelled : counters_.requests_expired);
          former_.Prune();  // it leaves the queue before it is answered
        });
    return !why.ok() || r->finished();
  });
}

bool DynamicBatcher::RunClaimed(int instance, std::vector<std::shared_ptr<QueuedRequest>> expired,
                                const std::optional<FormedBatch>& batch) {
  int64_t failed = 0;
  for (const auto& r : expired) {
    failed += r->Fail(absl::DeadlineExceededError(
                  absl::StrCat("model '", options_.model_name, "': the deadline passed after ",
                               absl::FormatDuration(r->deadline() - r->arrival()),
                               " in the queue; the request did not run")))
                  ? 1
                  : 0;
  }
  const absl::Status fault = batch.has_value() ? Execute(instance, *batch) : absl::OkStatus();
  const bool retire = !fault.ok() && !ProbePasses(instance, fault);
  {
    absl::MutexLock lock(&mu_);
    counters_.requests_expired += failed;
    --running_batches_;
    claimed_[instance] = 0;
    if (retire) retired_[instance] = 1;
    // The instance is free (or gone): its worker looks at the queue again if there is anything
    // in it.
    if (retire || former_.queued_requests() > 0) ++version_;
  }
  if (retire) Retire(instance, fault);
  return !retire;
}

void DynamicBatcher::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  ++version_;
  struct Idle {
    const DynamicBatcher* b;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return b->former_.queued_requests() == 0 && b->running_batches_ == 0;
    }
  };
  const Idle idle{this};
  mu_.Await(absl::Condition(&idle));
}

void DynamicBatcher::SetObserver(BatchObserver observer) {
  absl::MutexLock lock(&observer_mu_);
  observer_ = std::move(observer);
}

BatcherCounters DynamicBatcher::counters() const {
  absl::MutexLock lock(&mu_);
  BatcherCounters c = counters_;
  c.queued_requests = former_.queued_requests();
  return c;
}

void DynamicBatcher::Work(int instance) {
  // Changes of version_ wake a sleeping worker; evaluated by absl with mu_ held.
  struct News {
    const DynamicBatcher* b;
    uint64_t seen;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->version_ != seen; }
  };
  for (;;) {
    std::optional<FormedBatch> batch;
    std::vector<std::shared_ptr<QueuedRequest>> expired;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        // An instance a caller of Schedule retired after a fault has no worker any more.
        if (stopping_ || retired_[instance]) return;
        if (!claimed_[instance]) {  // else a caller of Schedule runs a batch on it
          const absl::Time now = clock_->Now();
          expired = former_.TakeExpired(now);
          if (expired.empty()) batch = former_.TakeBatch(now, draining_);
          if (!expired.empty() || batch.has_value()) {
            claimed_[instance] = 1;
            ++running_batches_;  // Drain waits until these requests have finished
            if (former_.queued_requests() > 0) ++version_;  // more for other workers
            break;
          }
        }
        const News news{this, version_};
        clock_->AwaitWithDeadline(&mu_, absl::Condition(&news), former_.NextEventTime());
      }
    }
    if (!RunClaimed(instance, std::move(expired), batch)) return;
  }
}

bool DynamicBatcher::ProbePasses(int instance, const absl::Status& fault) {
  InstancePool::Probe probe;
  {
    absl::MutexLock lock(&observer_mu_);
    probe = probe_;
  }
  return !probe || probe(instance, fault).ok();
}

void DynamicBatcher::Retire(int instance, const absl::Status& fault) {
  std::vector<std::shared_ptr<QueuedRequest>> left;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (--live_workers_ > 0) return;
    status = retired_status_ = absl::UnavailableError(
        absl::StrCat("model '", options_.model_name,
                     "': every instance failed and left rotation (the last, instance ", instance,
                     "): ", fault.message()));
    left = former_.TakeAll();
    ++version_;
  }
  for (const auto& r : left) r->Fail(status);
}

absl::Status DynamicBatcher::Execute(int instance, const FormedBatch& batch) {
  BatchStats stats;
  stats.instance = instance;
  stats.sequences = static_cast<int64_t>(batch.rows.size());
  stats.requests = batch.requests;
  stats.real_steps = batch.real_steps;
  stats.computed_steps = batch.computed_steps;
  stats.queue_durations = batch.queue_durations;
  RowOutcome outcome;
  const absl::Time start = clock_->Now();
  stats.status = RunRows(instance, batch.rows, &outcome);
  absl::Status fault = IsEngineFault(stats.status) ? stats.status : absl::OkStatus();
  // CANCELLED: the engine stopped because no request of the batch is still wanted (RunRows).
  if (!stats.status.ok() && batch.requests > 1 && !absl::IsCancelled(stats.status)) {
    // One request may have made the engine fail the batch: run each alone, so that it fails
    // alone and the others still get their answers.
    absl::Span<const BatchRow> rows(batch.rows);
    for (size_t begin = 0; begin < rows.size();) {
      size_t end = begin + 1;
      while (end < rows.size() && rows[end].request == rows[begin].request) ++end;
      const absl::Span<const BatchRow> alone = rows.subspan(begin, end - begin);
      if (const absl::Status s = RunRows(instance, alone, &outcome); !s.ok()) {
        outcome.failed += FailRows(alone, s);
        if (fault.ok() && IsEngineFault(s)) fault = s;
      }
      begin = end;
    }
  } else if (!stats.status.ok()) {
    outcome.failed += FailRows(batch.rows, stats.status);
  }
  stats.compute = clock_->Now() - start;
  {
    absl::MutexLock lock(&mu_);
    ++counters_.batches;
    counters_.sequences += stats.sequences;
    counters_.real_steps += stats.real_steps;
    counters_.computed_steps += stats.computed_steps;
    counters_.requests_completed += outcome.completed;
    counters_.requests_failed += outcome.failed;
  }
  absl::MutexLock lock(&observer_mu_);
  if (observer_) observer_(stats);
  return fault;
}

bool DynamicBatcher::IsWorkerThread() const { return CallingThreadIsOneOf(workers_); }

void DynamicBatcher::SetInstanceProbe(InstancePool::Probe probe) {
  absl::MutexLock lock(&observer_mu_);
  probe_ = std::move(probe);
}

absl::Status DynamicBatcher::RunRows(int instance, absl::Span<const BatchRow> rows,
                                     RowOutcome* outcome) {
  GatheredBatch gathered = GatherRows(rows, options_.input_time_axis, *instances_[instance]);
  std::map<std::string, std::vector<engine::Tensor>> final_states;
  if (gathered.wants_final_states) gathered.batch.final_states = &final_states;
  // The requests of the rows: once every one has been answered (the watch answers those whose
  // caller gave up), the engine stops at its next step boundary.
  std::vector<const QueuedRequest*> requests;
  for (const BatchRow& row : rows) {
    if (requests.empty() || requests.back() != row.request.get()) {
      requests.push_back(row.request.get());
    }
  }
  gathered.batch.stop = [requests = std::move(requests)] {
    for (const QueuedRequest* r : requests) {
      if (!r->finished()) return false;
    }
    return true;
  };
  std::vector<engine::Tensor> outputs;
  if (absl::Status s = instances_[instance]->Run(gathered.batch, &outputs); !s.ok()) return s;
  const Delivered d =
      ScatterRows(rows, outputs, gathered.wants_final_states ? &final_states : nullptr,
                  options_.output_time_axis, gathered.padded_steps);
  outcome->completed += d.completed;
  outcome->failed += d.failed;
  return absl::OkStatus();
}

}  // namespace rnnserve::server::batching
