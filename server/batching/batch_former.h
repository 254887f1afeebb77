#pragma once

// The dynamic batcher's decisions, without threads: which requests queue, when a batch is
// due, and which rows go into it. DynamicBatcher (dynamic_batcher.h) runs it under its lock;
// tests drive it directly with explicit times.
//
// FORMING. The head is the first queued request in service order (request_queue.h). Rows are
// picked in service order, starting with the head's first waiting row, skipping rows whose
// length would break the step budget (step_budget.h) and requests whose inputs cannot share a
// batch with the head's, until max_batch_size rows are picked. TakeBatch is asked by a free
// instance. Work-conserving (the default), that batch is due at once, whatever its size: the
// queue grows only while every instance is busy, and the next free one takes it all. With
// wait_when_idle, it is due
//   - at once when it is full (max_batch_size rows),
//   - at once, cut to the largest preferred batch size it reaches, when it reaches one,
//   - when the head has waited max_queue_delay_us,
//   - at once when flushing (draining for shutdown).
// A request whose deadline comes while any of its rows still waits is taken out (TakeExpired)
// before any batch is formed, so it costs no compute.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/batching/batch_request.h"
#include "server/batching/batcher_options.h"
#include "server/batching/queued_request.h"
#include "server/batching/request_queue.h"

namespace rnnserve::server::batching {

// Row `row` of `request` is one row of an engine batch.
struct BatchRow {
  std::shared_ptr<QueuedRequest> request;
  int64_t row = 0;
};

struct FormedBatch {
  std::vector<BatchRow> rows;  // batch row b is rows[b]
  int64_t requests = 0;        // distinct requests in rows
  int64_t real_steps = 0;      // sum of the rows' lengths
  int64_t computed_steps = 0;  // rows x the longest length
  // For each request whose first rows are in this batch: its wait in the queue.
  std::vector<absl::Duration> queue_durations;
};

class BatchFormer {
 public:
  // `options` must have passed ValidateOptions.
  explicit BatchFormer(DynamicBatcherOptions options);

  // Queues *request, taking ownership only on success. Fails, leaving *request with the
  // caller, with INVALID_ARGUMENT (inputs that do not match the model's count, inconsistent
  // batch axes or lengths, a priority outside [0, priority_levels]), DEADLINE_EXCEEDED (its
  // deadline is at or before `now`) or RESOURCE_EXHAUSTED (max_queue_size requests queued).
  // On success, `queued` (when not null) gets the queued request.
  absl::Status Add(std::unique_ptr<BatchRequest>* request, absl::Time now,
                   std::shared_ptr<QueuedRequest>* queued = nullptr);
  // Drops the requests that finished elsewhere (answered while queued: cancelled).
  void Prune();

  // Removes the requests whose deadline is at or before `now`; the caller fails them.
  std::vector<std::shared_ptr<QueuedRequest>> TakeExpired(absl::Time now);
  // The next batch if one is due at `now` (see FORMING); its rows leave the queue.
  std::optional<FormedBatch> TakeBatch(absl::Time now, bool flush);
  // Removes and returns every queued request.
  std::vector<std::shared_ptr<QueuedRequest>> TakeAll();

  // The earliest time at which, with no new request, TakeExpired or TakeBatch may return
  // something they do not return now; InfiniteFuture when the queue is empty.
  absl::Time NextEventTime() const;
  int64_t queued_requests() const { return queue_.size(); }

 private:
  absl::Status Check(const BatchRequest& request) const;
  // The rows FORMING picks for the head, at most max_batch_size.
  std::vector<BatchRow> PickRows(const QueuedRequest& head) const;
  FormedBatch Commit(std::vector<BatchRow> rows, absl::Time now);

  const DynamicBatcherOptions options_;
  const absl::Duration max_queue_delay_;
  const absl::Duration default_timeout_;  // InfiniteDuration when none

  RequestQueue queue_;
  uint64_t next_sequence_number_ = 0;
  // "model 'name'" and "model 'name': lengths", made once for the checks' error messages.
  const std::string model_label_;
  const std::string lengths_label_;
};

}  // namespace rnnserve::server::batching
