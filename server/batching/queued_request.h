#pragma once

// A request inside the dynamic batcher: which of its rows still wait, and its answer as it is
// put together from the batches its rows ran in.
//
// Rows are the unit of batching: a request's rows may run in several batches (it is larger
// than max_batch_size, or its sequences fall in different length buckets), and its answer is
// reassembled in row order before `done` is called.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/tensor.h"
#include "server/batching/batch_request.h"

namespace rnnserve::server::batching {

class QueuedRequest {
 public:
  // `input_time_axis` as in DynamicBatcherOptions; the request is already validated.
  QueuedRequest(std::unique_ptr<BatchRequest> request, uint64_t sequence_number, absl::Time arrival,
                absl::Time deadline, int level, const std::vector<bool>& input_time_axis);

  // Fixed at construction.
  const engine::Batch& inputs() const { return request_->batch; }
  uint64_t sequence_number() const { return sequence_number_; }  // arrival order
  absl::Time arrival() const { return arrival_; }
  absl::Time deadline() const { return deadline_; }
  int level() const { return level_; }  // 1 is served first among its caller's requests
  const std::string& caller() const { return request_->caller; }  // BatchRequest::caller
  int64_t rows() const { return static_cast<int64_t>(row_lengths_.size()); }
  // The request's time axis: axis 1 of its first input of rank >= 2; 0 when it has none.
  int64_t time_steps() const { return time_steps_; }
  // Each row's real steps: its given length, else time_steps() (1 when there is no time axis).
  int32_t row_length(int64_t row) const { return row_lengths_[row]; }
  bool has_lengths() const { return !request_->batch.lengths.empty(); }
  // Whether the caller asked for the recurrent layers' final states (Batch::final_states).
  bool wants_final_states() const { return request_->batch.final_states != nullptr; }
  // Whether rows of this request and `other` can share one engine batch: their inputs agree
  // on every axis but the batch axis and the padded time axis, and they give initial states
  // for the same layers, of the same shapes, and both continue sequences or both start them
  // (engine::Batch::continues).
  bool CanShareBatchWith(const QueuedRequest& other) const {
    return row_shapes_ == other.row_shapes_ && state_shapes_ == other.state_shapes_ &&
           request_->batch.continues == other.request_->batch.continues;
  }

  // Queue side: rows not yet in any batch, ascending. Owned by the batcher's queue, which
  // guards it with its own lock.
  std::vector<int64_t>& pending_rows() { return pending_rows_; }
  bool started() const { return started_; }
  void set_started() { started_ = true; }

  // Answer side; any thread.
  // True once `done` has been called (or is being called).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  enum class Outcome { kPending, kCompleted, kFailed, kIgnored };
  // Takes the rows of `outputs` (one tensor per model output, batch axis first) that belong
  // to this request: batch row batch_rows[k] is this request's row request_rows[k]. Outputs
  // whose `output_time_axis` entry is set and whose axis 1 equals `padded_steps` are cropped
  // to time_steps(). `final_states` (the batch's, or null) gives this request its rows of each
  // layer's final states when it asked for them; they are stored through the request's
  // Batch::final_states before `done` runs. Calls `done` when the last row arrives
  // (kCompleted), or with INTERNAL when the rows do not fit the earlier ones (kFailed);
  // kIgnored when the request had finished.
  Outcome Deliver(const std::vector<engine::Tensor>& outputs,
                  const std::map<std::string, std::vector<engine::Tensor>>* final_states,
                  absl::Span<const int64_t> batch_rows, absl::Span<const int64_t> request_rows,
                  const std::vector<bool>& output_time_axis, int64_t padded_steps);
  // Calls `done` with `status` unless the request has finished already. Returns true when it
  // did.
  bool Fail(absl::Status status);
  // When the caller gave up (abandon_watch.h's Abandoned: cancelled, or the request's own
  // deadline, not the queue's timeout, at `now`) and the request has not finished, calls
  // `done` with why, `context` appended to the message, and returns that status; OK otherwise.
  // `before_done` runs first, with that status, once the request counts as finished. Asks
  // BatchRequest::cancelled only while `done` has not started.
  absl::Status FailIfAbandoned(absl::Time now, absl::string_view context,
                               absl::FunctionRef<void(const absl::Status&)> before_done);

 private:
  const std::unique_ptr<BatchRequest> request_;
  const uint64_t sequence_number_;
  const absl::Time arrival_;
  const absl::Time deadline_;
  const int level_;
  const int64_t time_steps_;
  const std::vector<int32_t> row_lengths_;
  // Per input: its shape without the batch axis, the padded time axis set to -1.
  const std::vector<engine::Shape> row_shapes_;
  // Per layer given initial states: each state's shape without the batch axis.
  const std::map<std::string, std::vector<engine::Shape>> state_shapes_;

  std::vector<int64_t> pending_rows_;
  bool started_ = false;

  absl::Mutex mu_;
  // One per model output, [rows(), ...]; allocated when the first rows arrive.
  std::vector<engine::Tensor> outputs_ ABSL_GUARDED_BY(mu_);
  // The final states asked for, [rows(), ...] per layer and state, like outputs_.
  std::map<std::string, std::vector<engine::Tensor>> final_states_ ABSL_GUARDED_BY(mu_);
  int64_t rows_done_ ABSL_GUARDED_BY(mu_) = 0;
  // Set, under mu_, by whichever of Deliver and Fail moves `done` out of request_.
  std::atomic<bool> finished_{false};
};

// Copies `n` elements from src (from element `src_offset`) to dst (from `dst_offset`); both of
// one dtype.
void CopyElements(const engine::Tensor& src, int64_t src_offset, engine::Tensor* dst,
                  int64_t dst_offset, int64_t n);

}  // namespace rnnserve::server::batching
