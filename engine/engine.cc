#include "engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cuda/cuda_factory.h"
#include "engine/no_cuda_reason.h"

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

}  // namespace rnnserve::engine
