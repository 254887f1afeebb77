#include "server/batching/direct_scheduler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_util.h"
#include "server/metrics/batch_timesteps.h"

namespace rnnserve::server::batching {

absl::StatusOr<std::unique_ptr<DirectScheduler>> DirectScheduler::Create(
    const DirectSchedulerOptions& options, std::vector<engine::CompiledModel*> instances,
    InstancePool::Probe probe) {
  if (instances.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", options.model_name, "': a scheduler needs at least one instance"));
  }
  if (options.max_batch_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", options.model_name,
                                                   "': max_batch_size must not be negative; was ",
                                                   options.max_batch_size));
  }
  return std::unique_ptr<DirectScheduler>(
      new DirectScheduler(options, std::move(instances), std::move(probe)));
}

DirectScheduler::DirectScheduler(const DirectSchedulerOptions& options,
                                 std::vector<engine::CompiledModel*> instances,
                                 InstancePool::Probe probe)
    : options_(options),
      instances_(std::move(instances)),
      pool_(options.model_name, static_cast<int>(instances_.size()), std::move(probe)),
      runner_(std::make_unique<AsyncRunner>(static_cast<int>(instances_.size()))),
      watch_(std::make_unique<AbandonWatch>()) {}

DirectScheduler::~DirectScheduler() {
  runner_.reset();
  watch_.reset();
}

absl::Status DirectScheduler::Explained(const absl::Status& why, absl::string_view what) const {
  if (why.ok()) return why;
  return absl::Status(why.code(),
                      absl::StrCat("model '", options_.model_name, "': ", why.message(), what));
}

struct DirectScheduler::Waiting {
  const std::string caller;  // its turn in posted_
  const absl::Time queued;
  absl::Mutex mu;
  std::unique_ptr<BatchRequest> request ABSL_GUARDED_BY(mu);  // null once taken
  // The request if nobody took it yet.
  std::unique_ptr<BatchRequest> Take() {
    absl::MutexLock lock(&mu);
    return std::move(request);
  }
};

std::shared_ptr<DirectScheduler::Waiting> DirectScheduler::TakePosted(const Waiting* which) {
  using Verdict = FairQueue<std::shared_ptr<Waiting>>::Verdict;
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<Waiting>* head = posted_.Head();
  if (head == nullptr) return nullptr;
  const Waiting* const wanted = which != nullptr ? which : head->get();
  std::vector<std::shared_ptr<Waiting>> taken =
      posted_.Remove([&](const std::shared_ptr<Waiting>& w) {
        if (w.get() != wanted) return Verdict::kKeep;
        return which == nullptr ? Verdict::kServed : Verdict::kDropped;
      });
  return taken.empty() ? nullptr : std::move(taken[0]);
}

void DirectScheduler::Post(std::unique_ptr<BatchRequest> request, absl::Time queued) {
  auto waiting = std::make_shared<Waiting>(request->caller, queued);
  const bool watched = CanBeAbandoned(*request);
  {
    absl::MutexLock lock(&waiting->mu);
    waiting->request = std::move(request);
  }
  {
    absl::MutexLock lock(&mu_);
    posted_.Push(waiting->caller, 1, waiting);
  }
  if (watched) {
    watch_->Watch([this, waiting] {
      std::unique_ptr<BatchRequest> r;
      absl::Status why;
      {
        absl::MutexLock lock(&waiting->mu);
        if (waiting->request == nullptr) return true;  // running or answered
        why = Abandoned(*waiting->request, absl::Now());
        if (why.ok()) return false;
        r = std::move(waiting->request);
      }
      TakePosted(waiting.get());  // it gives up its place
      r->done(Explained(why, "; the request did not run"));
      Finished();
      return true;
    });
  }
  // The runner's next free thread takes whichever posted request's turn it is (ORDER), not
  // necessarily this one: one task per posted request.
  runner_->Post([this](bool start) mutable {
    const std::shared_ptr<Waiting> waiting = TakePosted(nullptr);
    if (waiting == nullptr) return;  // the watch answered it
    std::unique_ptr<BatchRequest> taken = waiting->Take();
    if (taken == nullptr) return;  // the watch answered it
    if (start) {
      Run(std::move(taken), waiting->queued);
      return;
    }
    taken->done(absl::UnavailableError(absl::StrCat(
        "model '", options_.model_name, "' is unloading; the request did not run; retry")));
    Finished();
  });
}

bool DirectScheduler::IsWorkerThread() const { return runner_->IsRunnerThread(); }

absl::Status DirectScheduler::Schedule(std::unique_ptr<BatchRequest>* request) {
  const absl::Time queued = absl::Now();
  if (queued > (*request)->deadline) {
    return absl::DeadlineExceededError("deadline passed before the request ran");
  }
  int running;
  {
    absl::MutexLock lock(&mu_);
    if (draining_) {
      return absl::UnavailableError(absl::StrCat("model '", options_.model_name,
                                                 "' is unloading; the request did not run; retry"));
    }
    running = in_flight_++;
  }
  std::unique_ptr<BatchRequest> taken = std::move(*request);
  // A caller that waits anyway, or an idle instance and a caller that may block for one engine
  // call: run here. Otherwise the runner's threads wait for the instances.
  if (taken->caller_blocks ||
      (taken->may_run_on_caller && running < static_cast<int>(instances_.size()))) {
    Run(std::move(taken), queued);
    return absl::OkStatus();
  }
  Post(std::move(taken), queued);
  return absl::OkStatus();
}

void DirectScheduler::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  mu_.Await(absl::Condition(
      +[](int* in_flight) { return *in_flight == 0; }, &in_flight_));
}

void DirectScheduler::Finished() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void DirectScheduler::Run(std::unique_ptr<BatchRequest> request, absl::Time queued) {
  absl::StatusOr<std::vector<engine::Tensor>> result;
  const BatchRequest* r = request.get();
  auto abandoned = [this, r]() -> absl::Status {
    return Explained(Abandoned(*r, absl::Now()), "; the request did not run");
  };
  const absl::StatusOr<int> instance = pool_.Acquire(
      request->deadline, r->cancelled ? std::function<absl::Status()>(abandoned) : nullptr,
      kAbandonPollInterval, r->caller);
  if (!instance.ok()) {
    result = instance.status();
  } else if (absl::Status why = abandoned(); !why.ok()) {
    pool_.Release(*instance, absl::OkStatus());
    result = why;
  } else {
    // The engine stops between steps once the caller gives up (engine::Batch::stop).
    request->batch.stop = StopWhenAbandoned(r->cancelled, r->deadline, RealClock());
    int held = *instance;
    result = RunCalls(&held, *r, absl::Now() - queued);
    if (held >= 0) pool_.Release(held, result.status());
    if (absl::IsCancelled(result.status())) {  // the engine stopped: say why
      const absl::Status why = Abandoned(*r, absl::Now());
      if (!why.ok()) result = Explained(why, "; its run was stopped");
    }
  }
  request->done(std::move(result));
  Finished();
}

absl::Status DirectScheduler::Call(int instance, const engine::Batch& batch,
                                   std::vector<engine::Tensor>* out,
                                   std::optional<absl::Duration> waited) {
  const absl::Time started = absl::Now();
  const absl::Status s = instances_[instance]->Run(batch, out);
  if (observer_) {
    const metrics::Timesteps steps = metrics::CountTimesteps(batch);
    BatchStats stats{.instance = instance,
                     .sequences = steps.batch_size,
                     .requests = 1,
                     .real_steps = steps.real,
                     .computed_steps = steps.computed,
                     .compute = absl::Now() - started,
                     .status = s};
    if (waited.has_value()) stats.queue_durations.push_back(*waited);
    observer_(stats);
  }
  return s;
}

absl::Status DirectScheduler::NextTurn(int* instance, const BatchRequest& r) {
  pool_.Release(*instance, absl::OkStatus());
  *instance = -1;
  auto stopped = [this, &r]() -> absl::Status {
    return Explained(Abandoned(r, absl::Now()), "; its run was stopped");
  };
  absl::StatusOr<int> next =
      pool_.Acquire(r.deadline, r.cancelled ? std::function<absl::Status()>(stopped) : nullptr,
                    kAbandonPollInterval, r.caller);
  if (!next.ok()) return next.status();
  *instance = *next;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<engine::Tensor>> DirectScheduler::RunCalls(int* instance,
                                                                      const BatchRequest& r,
                                                                      absl::Duration waited) {
  const engine::Batch& batch = r.batch;
  std::vector<engine::Tensor> outputs;
  const int64_t B = batch.inputs.empty() ? 0 : batch.inputs[0].dim(0);
  const int64_t limit = options_.max_batch_size > 0 ? options_.max_batch_size : B;
  if (B <= limit) {
    if (auto s = Call(*instance, batch, &outputs, waited); !s.ok()) return s;
    return outputs;
  }
  // Larger than one engine call: parts of `limit` rows, joined back in row order.
  std::vector<std::vector<engine::Tensor>> parts;
  std::vector<std::map<std::string, std::vector<engine::Tensor>>> part_states;
  for (int64_t begin = 0; begin < B; begin += limit) {
    std::vector<engine::Tensor> out;
    engine::Batch part = SliceBatch(batch, begin, std::min(B, begin + limit));
    part.stop = batch.stop;
    part_states.emplace_back();
    if (batch.final_states) part.final_states = &part_states.back();
    const std::optional<absl::Duration> first =
        begin == 0 ? std::optional<absl::Duration>(waited) : std::nullopt;
    // Each call is a turn of its own (ORDER): other callers' requests run between them.
    if (begin > 0) {
      if (absl::Status s = NextTurn(instance, r); !s.ok()) return s;
    }
    if (auto s = Call(*instance, part, &out, first); !s.ok()) return s;
    parts.push_back(std::move(out));
  }
  for (size_t o = 0; o < parts[0].size(); ++o) {
    std::vector<engine::Tensor> pieces;
    for (auto& p : parts) pieces.push_back(std::move(p[o]));
    outputs.push_back(ConcatRows(pieces));
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
  return outputs;
}

absl::Status DirectScheduler::RunOn(int instance, const engine::Batch& batch,
                                    std::vector<engine::Tensor>* outputs) {
  if (instance < 0 || instance >= static_cast<int>(instances_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("model '", options_.model_name, "' has ",
                                                   instances_.size(), " instances; asked for ",
                                                   instance));
  }
  if (absl::Status s = pool_.AcquireInstance(instance); !s.ok()) return s;
  const absl::Status s = instances_[instance]->Run(batch, outputs);
  pool_.Release(instance, s);
  return s;
}

}  // namespace rnnserve::server::batching
