#include "server/batching/queued_request.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/batching/abandon_watch.h"

namespace rnnserve::server::batching {
namespace {

int64_t TimeSteps(const engine::Batch& batch) {
  for (const engine::Tensor& t : batch.inputs) {
    if (t.rank() >= 2) return t.dim(1);
  }
  return 0;
}

std::vector<int32_t> RowLengths(const engine::Batch& batch, int64_t time_steps) {
  const int64_t rows = batch.inputs.empty() ? 0 : batch.inputs[0].dim(0);
  if (!batch.lengths.empty()) return batch.lengths;
  return std::vector<int32_t>(rows, static_cast<int32_t>(std::max<int64_t>(1, time_steps)));
}

std::vector<engine::Shape> RowShapes(const engine::Batch& batch,
                                     const std::vector<bool>& time_axis) {
  std::vector<engine::Shape> shapes;
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    engine::Shape s(batch.inputs[i].shape().begin() + 1, batch.inputs[i].shape().end());
    if (i < time_axis.size() && time_axis[i] && !s.empty()) s[0] = -1;
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::map<std::string, std::vector<engine::Shape>> StateShapes(const engine::Batch& batch) {
  std::map<std::string, std::vector<engine::Shape>> shapes;
  for (const auto& [layer, states] : batch.initial_states) {
    for (const engine::Tensor& t : states) {
      shapes[layer].emplace_back(t.shape().begin() + (t.rank() > 0 ? 1 : 0), t.shape().end());
    }
  }
  return shapes;
}

// Copies rows batch_rows[k] of `src` ([B, ...]) to rows request_rows[k] of *dst
// ([rows, ...]), allocating *dst when it is empty. A row of dst may be a prefix of a row of src
// (a cropped time axis) only where `prefix_ok`.
absl::Status CopyRows(const engine::Tensor& src, int64_t rows, absl::Span<const int64_t> batch_rows,
                      absl::Span<const int64_t> request_rows, bool prefix_ok, engine::Tensor* dst) {
  if (dst->rank() == 0) {
    engine::Shape shape = src.shape();
    shape[0] = rows;
    *dst = src.dtype() == engine::DType::kInt64 ? engine::Tensor::Int64(std::move(shape))
                                                : engine::Tensor::Float(std::move(shape));
  }
  bool fits = src.rank() >= 1 && src.dtype() == dst->dtype() && src.rank() == dst->rank();
  if (fits && src.rank() >= 2) {
    fits = prefix_ok ? dst->dim(1) <= src.dim(1) : dst->dim(1) == src.dim(1);
  }
  for (int d = 2; fits && d < src.rank(); ++d) fits = src.dim(d) == dst->dim(d);
  if (!fits) {
    return absl::InternalError(
        absl::StrCat("a batch has rows of shape ", engine::ShapeString(src.shape()),
                     " that do not fit this request's ", engine::ShapeString(dst->shape())));
  }
  const int64_t src_row = src.dim(0) == 0 ? 0 : src.num_elements() / src.dim(0);
  const int64_t dst_row = dst->num_elements() / rows;
  for (size_t k = 0; k < batch_rows.size(); ++k) {
    CopyElements(src, batch_rows[k] * src_row, dst, request_rows[k] * dst_row, dst_row);
  }
  return absl::OkStatus();
}

}  // namespace

void CopyElements(const engine::Tensor& src, int64_t src_offset, engine::Tensor* dst,
                  int64_t dst_offset, int64_t n) {
  if (src.dtype() == engine::DType::kInt64) {
    std::copy_n(src.i64() + src_offset, n, dst->i64() + dst_offset);
  } else {
    std::copy_n(src.f32() + src_offset, n, dst->f32() + dst_offset);
  }
}

QueuedRequest::QueuedRequest(std::unique_ptr<BatchRequest> request, uint64_t sequence_number,
                             absl::Time arrival, absl::Time deadline, int level,
                             const std::vector<bool>& input_time_axis)
    : request_(std::move(request)),
      sequence_number_(sequence_number),
      arrival_(arrival),
      deadline_(deadline),
      level_(level),
      time_steps_(TimeSteps(request_->batch)),
      row_lengths_(RowLengths(request_->batch, time_steps_)),
      row_shapes_(RowShapes(request_->batch, input_time_axis)),
      state_shapes_(StateShapes(request_->batch)) {
  pending_rows_.resize(row_lengths_.size());
  std::iota(pending_rows_.begin(), pending_rows_.end(), 0);
}

QueuedRequest::Outcome QueuedRequest::Deliver(
    const std::vector<engine::Tensor>& outputs,
    const std::map<std::string, std::vector<engine::Tensor>>* final_states,
    absl::Span<const int64_t> batch_rows, absl::Span<const int64_t> request_rows,
    const std::vector<bool>& output_time_axis, int64_t padded_steps) {
  absl::Status error;
  std::vector<engine::Tensor> answer;
  {
    absl::MutexLock lock(&mu_);
    if (finished()) return Outcome::kIgnored;
    if (outputs_.empty()) {
      // Shapes come from the first rows to arrive; a time axis that the batch padded is
      // cropped back to this request's own.
      for (size_t o = 0; o < outputs.size(); ++o) {
        engine::Shape shape = outputs[o].shape();
        if (shape.empty()) break;  // CopyRows reports it
        shape[0] = rows();
        const bool crop = o < output_time_axis.size() && output_time_axis[o] && shape.size() >= 2 &&
                          shape[1] == padded_steps;
        if (crop) shape[1] = time_steps_;
        const engine::DType dtype = outputs[o].dtype();
        if (request_->allocate_outputs) {  // the front end's buffer: the rows go to the wire
          outputs_.push_back(request_->allocate_outputs(static_cast<int>(o), dtype, shape));
          continue;
        }
        outputs_.push_back(dtype == engine::DType::kInt64
                               ? engine::Tensor::Int64(std::move(shape))
                               : engine::Tensor::Float(std::move(shape)));
      }
    }
    if (outputs_.size() != outputs.size()) {
      error =
          absl::InternalError(absl::StrCat("a batch returned ", outputs.size(),
                                           " outputs; an earlier one returned ", outputs_.size()));
    }
    for (size_t o = 0; o < outputs.size() && error.ok(); ++o) {
      const bool time = o < output_time_axis.size() && output_time_axis[o];
      error = CopyRows(outputs[o], rows(), batch_rows, request_rows, time, &outputs_[o]);
    }
    if (error.ok() && wants_final_states()) {
      if (final_states == nullptr) {
        error = absl::InternalError("the engine returned no final states");
      } else {
        for (const auto& [layer, states] : *final_states) {
          std::vector<engine::Tensor>& mine = final_states_[layer];
          mine.resize(states.size());
          for (size_t k = 0; k < states.size() && error.ok(); ++k) {
            error = CopyRows(states[k], rows(), batch_rows, request_rows, false, &mine[k]);
          }
        }
      }
    }
    if (error.ok()) {
      rows_done_ += static_cast<int64_t>(request_rows.size());
      if (rows_done_ < rows()) return Outcome::kPending;
      answer = std::move(outputs_);
      if (wants_final_states()) *request_->batch.final_states = std::move(final_states_);
    }
    finished_.store(true, std::memory_order_release);
  }
  // Only this thread set finished_, so `done` is its to call.
  if (!error.ok()) {
    request_->done(std::move(error));
    return Outcome::kFailed;
  }
  request_->done(std::move(answer));
  return Outcome::kCompleted;
}

absl::Status QueuedRequest::FailIfAbandoned(
    absl::Time now, absl::string_view context,
    absl::FunctionRef<void(const absl::Status&)> before_done) {
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    // finished_ is set under mu_ before `done` starts: the caller's context still lives.
    if (finished()) return absl::OkStatus();
    why = Abandoned(*request_, now);
    if (why.ok()) return why;
    why = absl::Status(why.code(), absl::StrCat(why.message(), context));
    finished_.store(true, std::memory_order_release);
  }
  before_done(why);
  request_->done(why);
  return why;
}

bool QueuedRequest::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished()) return false;
    finished_.store(true, std::memory_order_release);
  }
  request_->done(std::move(status));
  return true;
}

}  // namespace rnnserve::server::batching
