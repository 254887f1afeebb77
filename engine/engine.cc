#include "engine/engine.h"

#include <utility>

#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_factory.h"

namespace rnnserve::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  switch (options.kind) {
    case EngineKind::kCpu:
      return cpu::CreateCpuEngine();
    case EngineKind::kCuda:
      return cuda::CreateCudaEngine(options);
  }
  return absl::InvalidArgumentError("unknown engine kind");
}

bool CudaAvailable(std::string* why_not) { return cuda::VisibleGpus(why_not) > 0; }

Tensor CompiledModel::NewHostTensor(DType dtype, Shape shape) const {
  return dtype == DType::kInt64 ? Tensor::Int64(std::move(shape)) : Tensor::Float(std::move(shape));
}

}  // namespace rnnserve::engine
