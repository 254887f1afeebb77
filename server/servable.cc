// Servable's serving: Run with and without the dynamic batcher, RunOn, and the fault probe.
// Loading is in servable_load.cc.

#include "server/servable.h"

#include <algorithm>
#include <future>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_util.h"
#include "server/log.h"
#include "server/metrics/batch_timesteps.h"
#include "server/model_probe.h"

namespace rnnserve::server {

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
  // The report the batcher makes for an engine call (the wait is recorded above).
  const metrics::Timesteps steps = metrics::CountTimesteps(batch);
  recorder_.Observe({.instance = index,
                     .sequences = steps.batch_size,
                     .requests = 1,
                     .real_steps = steps.real,
                     .computed_steps = steps.computed,
                     .compute = absl::Now() - started,
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

absl::Status Servable::RunBatched(
    const engine::Batch& batch, std::vector<engine::Tensor>* outputs, const RunOptions& options,
    const std::function<absl::Status(std::unique_ptr<batching::BatchRequest>*)>& schedule,
    bool queue_metrics) const {
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  std::promise<Result> promise;
  std::future<Result> answer = promise.get_future();
  auto request = std::make_unique<batching::BatchRequest>();
  request->batch = batch;
  request->deadline = options.deadline;
  request->priority = options.priority;
  request->cancelled = options.cancelled;
  request->done = [&promise](Result result) { promise.set_value(std::move(result)); };
  // The batcher's observer reports the queue wait of requests whose rows start; a request that
  // leaves the queue without starting (deadline, unloading) is reported here.
  const absl::Time queued = absl::Now();
  if (queue_metrics) recorder_.Queued();
  if (absl::Status s = schedule(&request); !s.ok()) {
    if (queue_metrics) recorder_.LeftQueue(absl::Now() - queued);
    return s;
  }
  Result result = answer.get();
  if (queue_metrics &&
      (absl::IsDeadlineExceeded(result.status()) || absl::IsUnavailable(result.status()))) {
    recorder_.LeftQueue(absl::Now() - queued);
  }
  if (!result.ok()) return result.status();
  *outputs = std::move(*result);
  return absl::OkStatus();
}

absl::Status Servable::Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                           const RunOptions& options) const {
  if (cellular_ != nullptr) {
    return RunBatched(
        batch, outputs, options,
        [this](std::unique_ptr<batching::BatchRequest>* r) { return cellular_->Schedule(r); },
        /*queue_metrics=*/false);
  }
  if (batcher_ != nullptr) {
    return RunBatched(
        batch, outputs, options,
        [this](std::unique_ptr<batching::BatchRequest>* r) { return batcher_->Schedule(r); },
        /*queue_metrics=*/true);
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
