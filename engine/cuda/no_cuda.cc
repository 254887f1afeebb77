#include "engine/cuda/cuda_factory.h"
#include "engine/cuda/cuda_model.h"

namespace rnnserve::engine::cuda {

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const EngineOptions&) {
  return absl::UnavailableError("this build has no CUDA engine (CUDA or cuDNN not found)");
}

int VisibleGpus(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA engine (CUDA or cuDNN not found)";
  return 0;
}

int64_t HostCopiesInLastRun(const CompiledModel&) { return 0; }

int64_t GraphReplays(const CompiledModel&, std::string* note) {
  if (note != nullptr) note->clear();
  return 0;
}

}  // namespace rnnserve::engine::cuda
