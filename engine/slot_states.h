#pragma once

// SlotStates: recurrent states kept between engine calls in numbered slots, for step-level
// (cellular) batching (server/batching/cellular_scheduler.h).
//
// A slot holds one sequence's states (every recurrent layer's h and, for LSTM, c) while the
// sequence runs chunk by chunk beside others that join and leave between chunks. Run() advances
// the rows of a batch, row j from the states of slot slots[j], and leaves each row's final
// states in its slot: the states never travel through the caller. On the GPU engine they stay
// in device memory in slot order (gathered into the batch's rows and scattered back on the
// device); elsewhere the states live in host tensors and travel through Batch::initial_states
// and Batch::final_states of an ordinary Run.
//
// One SlotStates belongs to one CompiledModel instance and is used by one thread at a time (the
// thread that runs the instance); the instance must outlive it.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace rnnserve::engine {

// Recurrent states by layer name, in the order of Batch::initial_states: per layer h, then c for
// LSTM; each tensor [rows, ...].
using StateMap = std::map<std::string, std::vector<Tensor>>;
// StateRows (engine.h): per recurrent layer, the shape of each state row.

class SlotStates {
 public:
  virtual ~SlotStates() = default;

  // Sets the states of `slots` (distinct, each in [0, capacity())): row j of each tensor in
  // `states` goes to slot slots[j]; every state of a layer `states` does not name is zeroed.
  virtual absl::Status Write(const std::vector<int32_t>& slots, const StateMap& states) = 0;
  // The states of `slots`, every layer, as host tensors [slots.size(), ...].
  virtual absl::Status Read(const std::vector<int32_t>& slots, StateMap* states) = 0;
  // Runs `batch` on the instance, row j starting from the states of slot slots[j] (size B,
  // distinct) and leaving its final states there (the state after its last valid step, as
  // Batch::final_states has it). batch.initial_states must be empty and batch.final_states
  // null: the slots are the states.
  virtual absl::Status Run(Batch batch, const std::vector<int32_t>& slots,
                           std::vector<Tensor>* outputs) = 0;

  int capacity() const { return capacity_; }
  // Where the states live: "device" (the GPU engine's memory) or "host".
  virtual const char* where() const = 0;

 protected:
  explicit SlotStates(int capacity) : capacity_(capacity) {}

 private:
  const int capacity_;
};

// `capacity` zeroed slots of `rows`' states for `model`: the engine's own when it offers them
// (CompiledModel::NewSlotStates), else host tensors passed through Batch::initial_states and
// final_states. INVALID_ARGUMENT for a capacity below 1.
absl::StatusOr<std::unique_ptr<SlotStates>> NewSlotStates(CompiledModel* model,
                                                          const StateRows& rows, int capacity);

// Checks what SlotStates' methods take: slots distinct and in [0, capacity), and for Write each
// named layer known with `rows`' count of [slots.size(), ...] float tensors. `what` names the
// call in the message.
absl::Status CheckSlots(const std::vector<int32_t>& slots, int capacity, const char* what);
absl::Status CheckStateRows(const StateMap& states, const StateRows& rows, int64_t n);
// Run's: the slots, one a row of the batch, and no initial or final states.
absl::Status CheckRun(const Batch& batch, const std::vector<int32_t>& slots, int capacity);

}  // namespace rnnserve::engine
