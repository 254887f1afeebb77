#include "server/batching/batch_former.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/lengths.h"
#include "server/batching/step_budget.h"

namespace rnnserve::server::batching {

BatchFormer::BatchFormer(DynamicBatcherOptions options)
    : options_(std::move(options)),
      max_queue_delay_(absl::Microseconds(options_.max_queue_delay_us)),
      default_timeout_(options_.default_timeout_us > 0
                           ? absl::Microseconds(options_.default_timeout_us)
                           : absl::InfiniteDuration()),
      queue_(std::max(1, options_.priority_levels)),
      model_label_(absl::StrCat("model '", options_.model_name, "'")),
      lengths_label_(absl::StrCat(model_label_, ": lengths")) {}

absl::Status BatchFormer::Check(const BatchRequest& r) const {
  const std::string& model = model_label_;  // for error messages
  if (r.batch.inputs.size() != options_.input_time_axis.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model, " takes ", options_.input_time_axis.size(),
                     " input(s); the request has ", r.batch.inputs.size()));
  }
  const engine::Tensor& first = r.batch.inputs[0];
  if (first.rank() < 1 || first.dim(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(model, ": empty batch (input 0 has shape ",
                                                   engine::ShapeString(first.shape()),
                                                   "); expected at least one sequence"));
  }
  const int64_t rows = first.dim(0);
  int64_t steps = 0;
  for (size_t i = 0; i < r.batch.inputs.size(); ++i) {
    const engine::Tensor& t = r.batch.inputs[i];
    if (t.rank() < 1 || t.dim(0) != rows) {
      return absl::InvalidArgumentError(absl::StrCat(model, ": input ", i, " has shape ",
                                                     engine::ShapeString(t.shape()), "; expected ",
                                                     rows, " sequences on axis 0 like input 0"));
    }
    if (steps == 0 && t.rank() >= 2) steps = t.dim(1);
  }
  for (const auto& [layer, states] : r.batch.initial_states) {
    for (size_t k = 0; k < states.size(); ++k) {
      if (states[k].rank() < 1 || states[k].dim(0) != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(model, ": initial state ", k, " of layer '", layer, "' has shape ",
                         engine::ShapeString(states[k].shape()), "; expected ", rows,
                         " rows, one per sequence"));
      }
    }
  }
  if (auto st = engine::CheckLengths(r.batch.lengths, rows, steps, lengths_label_); !st.ok()) {
    return st;
  }
  if (r.priority < 0 || r.priority > options_.priority_levels) {
    return absl::InvalidArgumentError(
        options_.priority_levels == 0
            ? absl::StrCat(model, " has no priority levels; priority must be 0; was ", r.priority)
            : absl::StrCat(model, ": priority must be in [0, ", options_.priority_levels,
                           "] (0: the default level ", options_.default_priority_level,
                           "; 1 is served first); was ", r.priority));
  }
  if (!r.done) return absl::InvalidArgumentError("a batch request needs a done callback");
  return absl::OkStatus();
}

absl::Status BatchFormer::Add(std::unique_ptr<BatchRequest>* request, absl::Time now,
                              std::shared_ptr<QueuedRequest>* queued) {
  if (request == nullptr || *request == nullptr) {
    return absl::InvalidArgumentError("no request to schedule");
  }
  if (auto s = Check(**request); !s.ok()) return s;
  if (now >= (*request)->deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "model '", options_.model_name, "': the request's deadline passed before it queued"));
  }
  if (options_.max_queue_size > 0 && queue_.size() >= options_.max_queue_size) {
    queue_.Prune();  // finished requests may still hold places
    if (queue_.size() >= options_.max_queue_size) {
      return absl::ResourceExhaustedError(
          absl::StrCat("model '", options_.model_name, "': the queue is full (max_queue_size ",
                       options_.max_queue_size, " requests); retry later"));
    }
  }
  const int level = (*request)->priority == 0 ? std::max(1, options_.default_priority_level)
                                              : (*request)->priority;
  const absl::Time deadline = std::min((*request)->deadline, now + default_timeout_);
  auto q = std::make_shared<QueuedRequest>(std::move(*request), next_sequence_number_++, now,
                                           deadline, level, options_.input_time_axis);
  if (queued != nullptr) *queued = q;
  queue_.Push(std::move(q));
  return absl::OkStatus();
}

void BatchFormer::Prune() { queue_.Prune(); }

std::vector<std::shared_ptr<QueuedRequest>> BatchFormer::TakeExpired(absl::Time now) {
  return queue_.TakeExpired(now);
}

std::vector<std::shared_ptr<QueuedRequest>> BatchFormer::TakeAll() { return queue_.TakeAll(); }

std::vector<BatchRow> BatchFormer::PickRows(const QueuedRequest& head) const {
  std::vector<BatchRow> rows;
  StepBudget budget(options_.max_computed_steps_ratio);
  const auto limit = static_cast<size_t>(options_.max_batch_size);
  queue_.ForEach([&](const std::shared_ptr<QueuedRequest>& r) {
    if (!r->CanShareBatchWith(head)) return true;
    for (int64_t row : r->pending_rows()) {
      if (rows.size() == limit) return false;
      if (!budget.Fits(r->row_length(row))) continue;
      budget.Add(r->row_length(row));
      rows.push_back({r, row});
    }
    return rows.size() < limit;
  });
  return rows;
}

std::optional<FormedBatch> BatchFormer::TakeBatch(absl::Time now, bool flush) {
  queue_.Prune();
  const std::shared_ptr<QueuedRequest>* head = queue_.Head();
  if (head == nullptr) return std::nullopt;
  std::vector<BatchRow> rows = PickRows(**head);
  const auto size = static_cast<int64_t>(rows.size());
  const bool due = flush || !options_.wait_when_idle || size >= options_.max_batch_size ||
                   now >= (*head)->arrival() + max_queue_delay_;
  if (!due) {
    int64_t preferred = 0;
    for (int p : options_.preferred_batch_sizes) {
      if (p <= size) preferred = std::max<int64_t>(preferred, p);
    }
    if (preferred == 0) return std::nullopt;
    // A prefix of the picked rows keeps to the step budget: each row was admitted against
    // the rows before it.
    rows.resize(preferred);
  }
  return Commit(std::move(rows), now);
}

FormedBatch BatchFormer::Commit(std::vector<BatchRow> rows, absl::Time now) {
  FormedBatch batch;
  StepBudget steps(0);
  for (size_t i = 0; i < rows.size(); ++i) {
    QueuedRequest& r = *rows[i].request;
    steps.Add(r.row_length(rows[i].row));
    if (i > 0 && rows[i - 1].request == rows[i].request) continue;
    // The first row of a run of this request's rows; they are in pending order.
    ++batch.requests;
    if (!r.started()) {
      r.set_started();
      batch.queue_durations.push_back(now - r.arrival());
    }
    std::vector<int64_t>& pending = r.pending_rows();
    size_t j = i;
    std::erase_if(pending, [&](int64_t row) {
      if (j < rows.size() && rows[j].request.get() == &r && rows[j].row == row) {
        ++j;
        return true;
      }
      return false;
    });
  }
  queue_.Prune();
  batch.real_steps = steps.real_steps();
  batch.computed_steps = steps.computed_steps();
  batch.rows = std::move(rows);
  return batch;
}

absl::Time BatchFormer::NextEventTime() const {
  const std::shared_ptr<QueuedRequest>* head = queue_.Head();
  if (head == nullptr) return absl::InfiniteFuture();
  if (!options_.wait_when_idle) return queue_.EarliestDeadline();  // a batch is due now
  return std::min((*head)->arrival() + max_queue_delay_, queue_.EarliestDeadline());
}

}  // namespace rnnserve::server::batching
