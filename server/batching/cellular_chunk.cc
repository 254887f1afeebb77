#include "server/batching/cellular_chunk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::batching {
namespace {

engine::Tensor Zeros(engine::DType dtype, engine::Shape shape) {
  return dtype == engine::DType::kInt64 ? engine::Tensor::Int64(std::move(shape))
                                        : engine::Tensor::Float(std::move(shape));
}

// Elements of one step of a [B, T, ...] tensor (the axes after the time axis).
int64_t StepElements(const engine::Shape& shape) {
  int64_t n = 1;
  for (size_t d = 2; d < shape.size(); ++d) n *= shape[d];
  return n;
}

// Steps [0, n) of row `row` of a [B, T, ...] tensor, as [n, ...].
engine::Tensor Steps(const engine::Tensor& t, int64_t row, int64_t n) {
  engine::Shape shape(t.shape().begin() + 1, t.shape().end());
  shape[0] = n;
  engine::Tensor out = Zeros(t.dtype(), shape);
  const int64_t step = StepElements(t.shape());
  CopyElements(t, row * t.dim(1) * step, &out, 0, n * step);
  return out;
}

// Step `t` of row `row` of a [B, T, ...] tensor, as [1, ...].
engine::Tensor StepRow(const engine::Tensor& t, int64_t row, int64_t step) {
  engine::Shape shape(t.shape().begin() + 1, t.shape().end());
  shape[0] = 1;
  engine::Tensor out = Zeros(t.dtype(), shape);
  const int64_t n = StepElements(t.shape());
  CopyElements(t, (row * t.dim(1) + step) * n, &out, 0, n);
  return out;
}

// Row `row` of a [B, ...] tensor, as [1, ...].
engine::Tensor Row(const engine::Tensor& t, int64_t row) {
  engine::Shape shape = t.shape();
  shape[0] = 1;
  engine::Tensor out = Zeros(t.dtype(), shape);
  CopyElements(t, row * out.num_elements(), &out, 0, out.num_elements());
  return out;
}

// Copies the [1, ...] tensor `src` into row `row` of `dst`.
void PutRow(const engine::Tensor& src, int64_t row, engine::Tensor& dst) {
  CopyElements(src, 0, &dst, row * src.num_elements(), src.num_elements());
}

}  // namespace

CellularRequest::CellularRequest(std::unique_ptr<BatchRequest> request, absl::Time enqueued,
                                 std::shared_ptr<StepFeedback> feedback)
    : request_(std::move(request)),
      feedback_(std::move(feedback)),
      enqueued_(enqueued),
      rows_(request_->batch.inputs[0].dim(0)),
      steps_(request_->batch.inputs[0].rank() >= 2 ? request_->batch.inputs[0].dim(1) : 0),
      unfinished_(rows_) {}

int64_t CellularRequest::length(int64_t row) const {
  const auto& lengths = request_->batch.lengths;
  return lengths.empty() ? steps_ : lengths[static_cast<size_t>(row)];
}

void CellularRequest::Finish(const Slot& slot, const ChunkShape& shape) {
  absl::MutexLock lock(&mu_);
  if (answered_) return;
  const int64_t row = slot.row;
  if (outputs_.empty() && feedback_ == nullptr) {
    for (size_t o = 0; o < shape.output_time_axis.size(); ++o) {
      const bool per_step = shape.output_time_axis[o];
      const engine::Tensor& like = per_step ? slot.step_pieces[o][0] : slot.last_rows[o];
      engine::Shape out = like.shape();
      out[0] = rows_;
      if (per_step) out.insert(out.begin() + 1, steps_);
      outputs_.push_back(Zeros(like.dtype(), out));
    }
  }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    engine::Tensor& dst = outputs_[o];
    if (!shape.output_time_axis[o]) {
      PutRow(slot.last_rows[o], row, dst);
      continue;
    }
    // The computed steps chunk by chunk, then the last one repeated to T (zeros for an empty
    // sequence).
    const int64_t step = StepElements(dst.shape());
    const int64_t base = row * steps_ * step;
    int64_t t = 0;
    for (const engine::Tensor& piece : slot.step_pieces[o]) {
      const int64_t n = std::min(piece.dim(0), steps_ - t);
      CopyElements(piece, 0, &dst, base + t * step, n * step);
      t += n;
    }
    for (const int64_t last = t - 1; t < steps_ && last >= 0; ++t) {
      CopyElements(dst, base + last * step, &dst, base + t * step, step);
    }
  }
  if (request_->batch.final_states != nullptr) {
    for (const auto& [layer, rows] : slot.states) {
      auto& out = final_states_[layer];
      for (size_t i = 0; i < rows.size(); ++i) {
        if (out.size() <= i) {
          engine::Shape s = rows[i].shape();
          s[0] = rows_;
          out.push_back(engine::Tensor::Float(s));
        }
        PutRow(rows[i], row, out[i]);
      }
    }
  }
  if (--unfinished_ == 0) AnswerLocked();
}

void CellularRequest::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (answered_) return;
  answered_ = true;
  failed_.store(true, std::memory_order_release);
  request_->done(status);
}

void CellularRequest::AnswerLocked() {
  answered_ = true;
  if (request_->batch.final_states != nullptr) {
    *request_->batch.final_states = std::move(final_states_);
  }
  request_->done(std::move(outputs_));
}

engine::StateMap StartStates(const std::vector<Slot*>& fresh, const ChunkShape& shape) {
  engine::StateMap states;
  const int64_t n = static_cast<int64_t>(fresh.size());
  for (const auto& [layer, rows] : shape.state_rows) {
    auto given = [&, name = layer](const Slot* s) -> const std::vector<engine::Tensor>* {
      const auto& all = s->request->batch().initial_states;
      const auto it = all.find(name);
      return it == all.end() ? nullptr : &it->second;
    };
    if (std::none_of(fresh.begin(), fresh.end(), given)) continue;
    std::vector<engine::Tensor>& stacked = states[layer];
    for (size_t i = 0; i < rows.size(); ++i) {
      engine::Shape all = {n};
      all.insert(all.end(), rows[i].begin(), rows[i].end());
      stacked.push_back(engine::Tensor::Float(std::move(all)));
      const int64_t width = stacked.back().num_elements() / n;
      for (int64_t j = 0; j < n; ++j) {
        const std::vector<engine::Tensor>* mine = given(fresh[j]);
        if (mine != nullptr && i < mine->size()) {
          CopyElements((*mine)[i], fresh[j]->row * width, &stacked.back(), j * width, width);
        }
      }
    }
  }
  return states;
}

engine::Batch GatherChunk(const std::vector<Slot*>& slots, const ChunkShape& shape,
                          int64_t chunk_steps, bool fixed, const engine::CompiledModel& instance,
                          int64_t* steps) {
  // An empty sequence still runs once, for its states. Fed steps come one a chunk.
  const bool all_fed = std::all_of(slots.begin(), slots.end(), [](const Slot* s) {
    return s->done >= s->request->steps() && s->request->feedback() != nullptr;
  });
  int64_t k = fixed && !all_fed ? chunk_steps : 1;
  for (const Slot* s : slots) k = std::max(k, std::min(chunk_steps, s->remaining()));
  *steps = k;
  const int64_t A = static_cast<int64_t>(slots.size());
  engine::Batch batch;
  const engine::Batch& first = slots[0]->request->batch();
  for (size_t i = 0; i < shape.input_time_axis.size(); ++i) {
    const engine::Tensor& like = first.inputs[i];
    engine::Shape chunk = like.shape();
    chunk[0] = A;
    chunk[1] = k;
    engine::Tensor t = instance.NewHostTensor(like.dtype(), chunk);
    const int64_t step = StepElements(chunk);
    for (int64_t j = 0; j < A; ++j) {
      const Slot& s = *slots[j];
      const int64_t n = std::min(k, s.remaining());
      if (s.done >= s.request->steps()) {  // a fed step (one: remaining() is 1)
        CopyElements(s.fed[i], 0, &t, j * k * step, n * step);
        continue;
      }
      const engine::Tensor& src = s.request->batch().inputs[i];
      CopyElements(src, (s.row * src.dim(1) + s.done) * step, &t, j * k * step, n * step);
    }
    batch.inputs.push_back(std::move(t));
  }
  for (const Slot* s : slots) {
    batch.lengths.push_back(static_cast<int32_t>(std::min(k, s->remaining())));
  }
  return batch;
}

absl::Status ScatterChunk(const std::vector<Slot*>& slots, const ChunkShape& shape, int64_t steps,
                          const std::vector<engine::Tensor>& outputs) {
  const int64_t A = static_cast<int64_t>(slots.size());
  if (outputs.size() != shape.output_time_axis.size()) {
    return absl::InternalError(absl::StrCat("the engine returned ", outputs.size(),
                                            " outputs; the model has ",
                                            shape.output_time_axis.size()));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const engine::Tensor& t = outputs[o];
    const bool per_step = shape.output_time_axis[o];
    if (t.rank() < (per_step ? 2 : 1) || t.dim(0) != A || (per_step && t.dim(1) != steps)) {
      return absl::InternalError(absl::StrCat("output ", o, " of a chunk of ", A, " rows and ",
                                              steps, " steps has shape ",
                                              engine::ShapeString(t.shape())));
    }
  }
  for (int64_t j = 0; j < A; ++j) {
    Slot& s = *slots[j];
    const int64_t n = std::min(steps, s.remaining());
    if (s.step_pieces.empty()) s.step_pieces.resize(outputs.size());
    s.last_rows.resize(outputs.size());
    const bool fed = s.request->feedback() != nullptr;
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (fed) {
        if (n == s.remaining() && n > 0) {
          s.last_rows[o] =
              shape.output_time_axis[o] ? StepRow(outputs[o], j, n - 1) : Row(outputs[o], j);
        }
      } else if (shape.output_time_axis[o]) {
        s.step_pieces[o].push_back(Steps(outputs[o], j, n));
      } else if (n == s.remaining()) {
        s.last_rows[o] = Row(outputs[o], j);
      }
    }
    s.done += n;
    s.started = true;
  }
  return absl::OkStatus();
}

absl::Status FeedSlot(Slot& slot) {
  const engine::Batch& batch = slot.request->batch();
  std::vector<engine::Tensor> next;
  if (!slot.request->feedback()->Next(slot.row, slot.last_rows, &next)) return absl::OkStatus();
  if (next.size() != batch.inputs.size()) {
    return absl::InternalError(absl::StrCat("step feedback gave ", next.size(),
                                            " inputs; the request has ", batch.inputs.size()));
  }
  for (size_t i = 0; i < next.size(); ++i) {
    const engine::Tensor& like = batch.inputs[i];
    engine::Shape want = like.shape();
    want[0] = 1;
    want[1] = 1;
    if (next[i].dtype() != like.dtype() || next[i].shape() != want) {
      return absl::InternalError(absl::StrCat(
          "step feedback gave input ", i, " of shape ", engine::ShapeString(next[i].shape()),
          "; expected ", engine::ShapeString(want), " of the request's dtype"));
    }
  }
  slot.fed = std::move(next);
  ++slot.length;
  return absl::OkStatus();
}

}  // namespace rnnserve::server::batching
