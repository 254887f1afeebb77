#include "engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/no_cuda_reason.h"
#include "engine/slot_states.h"

namespace rnnserve::engine {

// Engine::Create, CudaAvailable and CpuKernelsNote are the engine factory's
// (engine/factory/engine_factory.cc): the core names no engine.

std::string NoCudaDeviceReason(absl::string_view cuda_error, int driver_version,
                               int runtime_version) {
  auto version = [](int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); };
  std::string why = "no CUDA device";
  if (driver_version == 0) {
    why += ": no NVIDIA driver found";
  } else if (runtime_version > 0 && driver_version < runtime_version) {
    absl::StrAppend(&why, ": the NVIDIA driver supports CUDA ", version(driver_version),
                    "; this build needs ", version(runtime_version));
  }
  if (!cuda_error.empty()) absl::StrAppend(&why, " (CUDA runtime: ", cuda_error, ")");
  return why;
}

Tensor CompiledModel::NewHostTensor(DType dtype, Shape shape) const {
  return dtype == DType::kInt64 ? Tensor::Int64(std::move(shape)) : Tensor::Float(std::move(shape));
}

absl::StatusOr<std::unique_ptr<SlotStates>> CompiledModel::NewSlotStates(const StateRows&, int) {
  return nullptr;
}

}  // namespace rnnserve::engine
