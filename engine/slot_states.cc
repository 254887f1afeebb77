#include "engine/slot_states.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine {
namespace {

// Slot states in host tensors, one [capacity, ...] a state, passed to the instance through an
// ordinary Run's initial and final states.
class HostSlotStates final : public SlotStates {
 public:
  HostSlotStates(CompiledModel* model, const StateRows& rows, int capacity)
      : SlotStates(capacity), model_(model), rows_(rows) {
    for (const auto& [layer, shapes] : rows_) {
      for (const Shape& row : shapes) {
        Shape all = {capacity};
        all.insert(all.end(), row.begin(), row.end());
        store_[layer].push_back(Tensor::Float(std::move(all)));
      }
    }
  }

  absl::Status Write(const std::vector<int32_t>& slots, const StateMap& states) override {
    if (absl::Status st = CheckSlots(slots, capacity(), "SlotStates::Write"); !st.ok()) return st;
    if (absl::Status st = CheckStateRows(states, rows_, static_cast<int64_t>(slots.size()));
        !st.ok())
      return st;
    for (auto& [layer, tensors] : store_) {
      const auto given = states.find(layer);
      for (size_t i = 0; i < tensors.size(); ++i) {
        const int64_t width = RowElements(tensors[i]);
        for (size_t j = 0; j < slots.size(); ++j) {
          float* dst = tensors[i].f32() + slots[j] * width;
          if (given == states.end()) {
            std::fill(dst, dst + width, 0.0f);
          } else {
            std::memcpy(dst, given->second[i].f32() + j * width, width * sizeof(float));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Read(const std::vector<int32_t>& slots, StateMap* states) override {
    if (absl::Status st = CheckSlots(slots, capacity(), "SlotStates::Read"); !st.ok()) return st;
    states->clear();
    for (const auto& [layer, tensors] : store_) {
      std::vector<Tensor>& out = (*states)[layer];
      for (const Tensor& t : tensors) out.push_back(Gather(t, slots));
    }
    return absl::OkStatus();
  }

  absl::Status Run(Batch batch, const std::vector<int32_t>& slots,
                   std::vector<Tensor>* outputs) override {
    if (absl::Status st = CheckRun(batch, slots, capacity()); !st.ok()) return st;
    for (const auto& [layer, tensors] : store_) {
      for (const Tensor& t : tensors) batch.initial_states[layer].push_back(Gather(t, slots));
    }
    StateMap finals;
    batch.final_states = &finals;
    if (absl::Status st = model_->Run(batch, outputs); !st.ok()) return st;
    for (auto& [layer, tensors] : store_) {
      const auto it = finals.find(layer);
      if (it == finals.end() || it->second.size() != tensors.size()) {
        return absl::InternalError(
            absl::StrCat("the engine gave no final states for layer '", layer, "'"));
      }
      for (size_t i = 0; i < tensors.size(); ++i) {
        const int64_t width = RowElements(tensors[i]);
        const Tensor& src = it->second[i];
        if (src.dtype() != DType::kFloat32 ||
            src.num_elements() != width * static_cast<int64_t>(slots.size())) {
          return absl::InternalError(absl::StrCat("layer '", layer, "': final state ", i, " is ",
                                                  ShapeString(src.shape())));
        }
        for (size_t j = 0; j < slots.size(); ++j) {
          std::memcpy(tensors[i].f32() + slots[j] * width, src.f32() + j * width,
                      width * sizeof(float));
        }
      }
    }
    return absl::OkStatus();
  }

  const char* where() const override { return "host"; }

 private:
  static int64_t RowElements(const Tensor& t) { return t.num_elements() / t.dim(0); }

  static Tensor Gather(const Tensor& t, const std::vector<int32_t>& slots) {
    const int64_t width = RowElements(t);
    Shape shape = t.shape();
    shape[0] = static_cast<int64_t>(slots.size());
    Tensor out = Tensor::Float(std::move(shape));
    for (size_t j = 0; j < slots.size(); ++j) {
      std::memcpy(out.f32() + j * width, t.f32() + slots[j] * width, width * sizeof(float));
    }
    return out;
  }

  CompiledModel* const model_;
  const StateRows rows_;
  StateMap store_;  // per layer and state: [capacity, ...]
};

}  // namespace

absl::Status CheckSlots(const std::vector<int32_t>& slots, int capacity, const char* what) {
  std::vector<bool> seen(static_cast<size_t>(std::max(capacity, 0)));
  for (int32_t s : slots) {
    if (s < 0 || s >= capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": slot ", s, " is outside [0, ", capacity, ")"));
    }
    if (seen[s]) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": slot ", s, " is named twice"));
    }
    seen[s] = true;
  }
  return absl::OkStatus();
}

absl::Status CheckStateRows(const StateMap& states, const StateRows& rows, int64_t n) {
  for (const auto& [layer, tensors] : states) {
    const auto it = rows.find(layer);
    if (it == rows.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("states for layer '", layer, "', which keeps none in slots"));
    }
    if (tensors.size() != it->second.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", layer, "': ", tensors.size(), " states given, expected ", it->second.size()));
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      Shape want = {n};
      want.insert(want.end(), it->second[i].begin(), it->second[i].end());
      if (tensors[i].dtype() != DType::kFloat32 || tensors[i].shape() != want) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", layer, "': state ", i, " is ",
                                                       ShapeString(tensors[i].shape()),
                                                       ", expected float ", ShapeString(want)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRun(const Batch& batch, const std::vector<int32_t>& slots, int capacity) {
  if (absl::Status st = CheckSlots(slots, capacity, "SlotStates::Run"); !st.ok()) return st;
  if (!batch.initial_states.empty() || batch.final_states != nullptr) {
    return absl::InvalidArgumentError(
        "SlotStates::Run takes no initial or final states: the slots hold them");
  }
  if (batch.inputs.empty() || batch.inputs[0].rank() < 1 ||
      batch.inputs[0].dim(0) != static_cast<int64_t>(slots.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("SlotStates::Run: ", slots.size(), " slots for a batch of ",
                     batch.inputs.empty() ? 0 : batch.inputs[0].dim(0), " rows"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SlotStates>> NewSlotStates(CompiledModel* model,
                                                          const StateRows& rows, int capacity) {
  if (capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot states need a capacity of at least 1; was ", capacity));
  }
  auto own = model->NewSlotStates(rows, capacity);
  if (!own.ok() || *own != nullptr) return own;
  return std::make_unique<HostSlotStates>(model, rows, capacity);
}

}  // namespace rnnserve::engine
