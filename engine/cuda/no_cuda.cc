#include "engine/cuda/cuda_factory.h"

namespace rnnserve::engine::cuda {

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const EngineOptions&,
                                                         std::shared_ptr<const HostFallback>) {
  return absl::UnavailableError("this build has no CUDA engine (CUDA or cuDNN not found)");
}

int VisibleGpus(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA engine (CUDA or cuDNN not found)";
  return 0;
}

}  // namespace rnnserve::engine::cuda
