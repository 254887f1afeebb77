#include "server/batching/batch_assembly.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::batching {

namespace {

// Row `rows[b].row` of each row's tensor, stacked: [rows, ...]. `pick` finds the tensor of a
// request; the requests agree on its shape past the batch axis.
template <typename Pick>
engine::Tensor StackRows(absl::Span<const BatchRow> rows, const engine::CompiledModel& model,
                         Pick pick) {
  const engine::Tensor& first = pick(*rows[0].request);
  engine::Shape shape = first.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  engine::Tensor out = model.NewHostTensor(first.dtype(), shape);
  const int64_t row = first.num_elements() / first.dim(0);
  for (size_t b = 0; b < rows.size(); ++b) {
    CopyElements(pick(*rows[b].request), rows[b].row * row, &out, static_cast<int64_t>(b) * row,
                 row);
  }
  return out;
}

}  // namespace

GatheredBatch GatherRows(absl::Span<const BatchRow> rows, const std::vector<bool>& input_time_axis,
                         const engine::CompiledModel& model) {
  GatheredBatch out;
  const auto n = static_cast<int64_t>(rows.size());
  const engine::Batch& first = rows[0].request->inputs();
  bool lengths_needed = false;
  for (const BatchRow& r : rows) {
    out.padded_steps = std::max(out.padded_steps, r.request->time_steps());
    lengths_needed |= r.request->has_lengths();
  }
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const bool time =
        i < input_time_axis.size() && input_time_axis[i] && first.inputs[i].rank() >= 2;
    engine::Shape shape = first.inputs[i].shape();
    shape[0] = n;
    if (time) {
      for (const BatchRow& r : rows) {
        const int64_t t = r.request->inputs().inputs[i].dim(1);
        lengths_needed |= t != shape[1];
        shape[1] = std::max(shape[1], t);
      }
    }
    engine::Tensor batch = model.NewHostTensor(first.inputs[i].dtype(), shape);
    const int64_t dst_row = n == 0 ? 0 : batch.num_elements() / n;
    for (int64_t b = 0; b < n; ++b) {
      const engine::Tensor& src = rows[b].request->inputs().inputs[i];
      const int64_t src_row = src.num_elements() / src.dim(0);
      // [T, ...] of the request is a prefix of [T_max, ...]; the rest stays zero.
      CopyElements(src, rows[b].row * src_row, &batch, b * dst_row, src_row);
    }
    out.batch.inputs.push_back(std::move(batch));
  }
  for (const auto& entry : first.initial_states) {
    const std::string& layer = entry.first;  // a plain reference: lambdas capture it
    std::vector<engine::Tensor>& stacked = out.batch.initial_states[layer];
    for (size_t k = 0; k < entry.second.size(); ++k) {
      stacked.push_back(
          StackRows(rows, model, [&](const QueuedRequest& r) -> const engine::Tensor& {
            return r.inputs().initial_states.at(layer)[k];
          }));
    }
  }
  for (const BatchRow& r : rows) out.wants_final_states |= r.request->wants_final_states();
  out.batch.continues = first.continues;
  if (lengths_needed && out.padded_steps > 0) {
    out.batch.lengths.reserve(rows.size());
    for (const BatchRow& r : rows) out.batch.lengths.push_back(r.request->row_length(r.row));
  }
  return out;
}

Delivered ScatterRows(absl::Span<const BatchRow> rows, const std::vector<engine::Tensor>& outputs,
                      const std::map<std::string, std::vector<engine::Tensor>>* final_states,
                      const std::vector<bool>& output_time_axis, int64_t padded_steps) {
  Delivered delivered;
  const auto n = static_cast<int64_t>(rows.size());
  auto wrong_rows = [&](const engine::Tensor& t) { return t.rank() < 1 || t.dim(0) != n; };
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (wrong_rows(outputs[o])) {
      delivered.failed =
          FailRows(rows, absl::InternalError(absl::StrCat(
                             "the engine returned output ", o, " of shape ",
                             engine::ShapeString(outputs[o].shape()), " for a batch of ", n)));
      return delivered;
    }
  }
  if (final_states != nullptr) {
    for (const auto& [layer, states] : *final_states) {
      for (const engine::Tensor& t : states) {
        if (!wrong_rows(t)) continue;
        delivered.failed =
            FailRows(rows, absl::InternalError(absl::StrCat(
                               "the engine returned a final state of layer '", layer, "' of shape ",
                               engine::ShapeString(t.shape()), " for a batch of ", n)));
        return delivered;
      }
    }
  }
  // Rows of one request are adjacent (the former picks them request by request).
  std::vector<int64_t> batch_rows, request_rows;
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin;
    batch_rows.clear();
    request_rows.clear();
    while (end < rows.size() && rows[end].request == rows[begin].request) {
      batch_rows.push_back(static_cast<int64_t>(end));
      request_rows.push_back(rows[end].row);
      ++end;
    }
    switch (rows[begin].request->Deliver(outputs, final_states, batch_rows, request_rows,
                                         output_time_axis, padded_steps)) {
      case QueuedRequest::Outcome::kCompleted:
        ++delivered.completed;
        break;
      case QueuedRequest::Outcome::kFailed:
        ++delivered.failed;
        break;
      default:
        break;
    }
    begin = end;
  }
  return delivered;
}

int64_t FailRows(absl::Span<const BatchRow> rows, const absl::Status& status) {
  int64_t failed = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].request == rows[i - 1].request) continue;
    failed += rows[i].request->Fail(status) ? 1 : 0;
  }
  return failed;
}

}  // namespace rnnserve::server::batching
