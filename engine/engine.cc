#include "engine/engine.h"

#include <utility>

#include "engine/slot_states.h"

namespace rnnserve::engine {

// Engine::Create, CudaAvailable and CpuKernelsNote are the engine factory's
// (engine/factory/engine_factory.cc): the core names no engine.

Tensor CompiledModel::NewHostTensor(DType dtype, Shape shape) const {
  return dtype == DType::kInt64 ? Tensor::Int64(std::move(shape)) : Tensor::Float(std::move(shape));
}

absl::StatusOr<std::unique_ptr<SlotStates>> CompiledModel::NewSlotStates(const StateRows&, int) {
  return nullptr;
}

}  // namespace rnnserve::engine
