// CellularScheduler on resident step loops (engine/step_loop.h; on the GPU engine,
// engine/cuda/resident_loop.h). The worker of an instance only feeds and drains its loop:
//   - admit: queued sequences take free slots (Admit, as with chunks) and join the loop at
//     once; an empty sequence (length 0) is answered at once with zeros, as the chunked path
//     answers it;
//   - drain: a slot whose sequence the loop took reports its time to first step (from queued
//     to the loop taking it); a slot whose sequence is done gives its rows to its request and
//     goes back to the free list. A request whose deadline passes or whose client cancels is
//     answered at once; its sequences run to their end in the loop (one step each at a time)
//     before their slots are free.
// Between these the worker spins (a core per instance): a step is a few microseconds.

#include <thread>

#include "absl/strings/str_cat.h"
#include "server/batching/cellular_scheduler.h"

namespace rnnserve::server::batching {
namespace {

// Why a sequence's request no longer wants its answer, or OK (cellular_scheduler.cc's Leaves).
absl::Status Gone(const CellularRequest& r, absl::Time now) {
  if (r.failed() || now > r.deadline()) {
    return absl::DeadlineExceededError("deadline passed before the sequence finished");
  }
  if (r.cancelled()) return absl::CancelledError("the client cancelled the call");
  return absl::OkStatus();
}

// The rows of an empty sequence: zeros (Keras's answer for a sequence with no steps).
void EmptyRows(Slot& slot, const ChunkShape& shape, const std::vector<engine::Shape>& rows) {
  slot.step_pieces.assign(rows.size(), {});
  slot.last_rows.clear();
  for (size_t o = 0; o < rows.size(); ++o) {
    engine::Shape piece = {shape.output_time_axis[o] ? 0 : 1};
    piece.insert(piece.end(), rows[o].begin(), rows[o].end());
    if (shape.output_time_axis[o]) {
      slot.step_pieces[o].push_back(engine::Tensor::Float(std::move(piece)));
      slot.last_rows.emplace_back();
    } else {
      slot.last_rows.push_back(engine::Tensor::Float(std::move(piece)));
    }
  }
  for (const auto& [layer, states] : shape.state_rows) {
    for (const engine::Shape& r : states) {
      engine::Shape s = {1};
      s.insert(s.end(), r.begin(), r.end());
      slot.states[layer].push_back(engine::Tensor::Float(std::move(s)));
    }
  }
}

}  // namespace

absl::Status CellularScheduler::StartResidentLoops() {
  for (engine::CompiledModel* instance : instances_) {
    auto* source = dynamic_cast<engine::StepLoopSource*>(instance);
    if (source == nullptr) {
      resident_note_ = "the engine has no resident step loop";
      break;
    }
    if (std::string why = source->StepLoopUnsupported(); !why.empty()) {
      resident_note_ = std::move(why);
      break;
    }
  }
  if (!resident_note_.empty()) return absl::OkStatus();  // chunks, as without the option
  for (size_t i = 0; i < instances_.size(); ++i) {
    auto loop = dynamic_cast<engine::StepLoopSource*>(instances_[i])
                    ->NewStepLoop(options_.max_active_sequences, options_.resident_max_steps);
    if (!loop.ok()) {
      return absl::Status(loop.status().code(),
                          absl::StrCat("resident step loop: ", loop.status().message()));
    }
    slots_[i].loop = *std::move(loop);
  }
  return absl::OkStatus();
}

absl::Status CellularScheduler::CheckResident(const BatchRequest& request) const {
  const engine::Batch& batch = request.batch;
  if (!batch.initial_states.empty() || batch.continues) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", options_.model_name,
                     ": the resident step loop starts sequences from zero states; the request "
                     "gives initial states"));
  }
  if (batch.inputs[0].rank() >= 2 && batch.inputs[0].dim(1) > options_.resident_max_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", options_.model_name, ": input '", 0, "' has ", batch.inputs[0].dim(1),
        " steps; the resident step loop takes at most ", options_.resident_max_steps));
  }
  return absl::OkStatus();
}

void CellularScheduler::WorkResident(int instance) {
  engine::StepLoop& loop = *slots_[instance].loop;
  const int capacity = options_.max_active_sequences;
  std::vector<std::unique_ptr<Slot>> running(capacity);  // by slot index
  int64_t in_loop = 0;
  while (true) {
    std::vector<std::unique_ptr<Slot>> admitted, expired;
    {
      absl::MutexLock lock(&mu_);
      if (in_loop == 0) {
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty();
        };
        clock_->AwaitWithDeadline(&mu_, absl::Condition(&ready), absl::InfiniteFuture());
      }
      if (stopping_) {
        active_ -= in_loop;
        break;
      }
      Admit(instance, admitted, expired);
    }
    const absl::Time now = clock_->Now();
    for (auto& slot : expired) slot->request->Fail(Gone(*slot->request, now));
    ChunkStats stats{.instance = instance, .capacity = capacity, .steps = 1};
    int64_t left = 0;
    for (auto& slot : admitted) {
      Slot& s = *slot;
      absl::Status st;
      if (s.length == 0) {
        EmptyRows(s, options_.shape, loop.output_rows());
        s.request->Finish(s, options_.shape);
        Release(instance, s);
        ++left;
        continue;
      }
      st = loop.Join(s.index, s.request->batch().inputs[0], s.row, static_cast<int>(s.length));
      if (!st.ok()) {
        s.request->Fail(st);
        Release(instance, s);
        ++left;
        continue;
      }
      running[s.index] = std::move(slot);
      ++in_loop;
    }
    for (int i = 0; i < capacity; ++i) {
      if (running[i] == nullptr) continue;
      Slot& s = *running[i];
      if (!s.started && loop.Started(i)) {
        s.started = true;
        stats.first_step_latencies.push_back(clock_->Now() - s.request->enqueued());
      }
      if (absl::Status why = Gone(*s.request, now); !why.ok()) s.request->Fail(why);
      if (!loop.Done(i)) continue;
      std::vector<engine::Tensor> outputs;
      const bool states = s.request->batch().final_states != nullptr;
      absl::Status st = loop.Outputs(i, &outputs, states ? &s.states : nullptr);
      if (st.ok()) {
        s.step_pieces.assign(outputs.size(), {});
        s.last_rows.assign(outputs.size(), engine::Tensor());
        for (size_t o = 0; o < outputs.size(); ++o) {
          if (options_.shape.output_time_axis[o]) {
            s.step_pieces[o].push_back(std::move(outputs[o]));
          } else {
            s.last_rows[o] = std::move(outputs[o]);
          }
        }
        s.done = s.length;
        s.request->Finish(s, options_.shape);  // nothing when its request failed already
      } else {
        s.request->Fail(st);
      }
      Release(instance, s);
      running[i].reset();
      --in_loop;
      ++stats.finished;
      ++left;
    }
    stats.active = in_loop;
    if (observer_ && (stats.finished > 0 || !stats.first_step_latencies.empty())) {
      observer_(stats);
    }
    if (left > 0) {
      absl::MutexLock lock(&mu_);
      active_ -= left;
    }
    if (admitted.empty() && stats.finished == 0) std::this_thread::yield();
  }
  const absl::Status gone =
      absl::UnavailableError(absl::StrCat("model ", options_.model_name, " is unloading"));
  for (auto& slot : running) {
    if (slot != nullptr) slot->request->Fail(gone);
  }
}

}  // namespace rnnserve::server::batching
