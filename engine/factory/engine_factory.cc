// The engine factory: the one place that knows every engine of this build (CMake target
// rnnserve_engine). It defines what engine.h declares for callers that pick an engine by kind,
// and hands the CPU engine's host fallback to the GPU engine, so that engine/cpu and
// engine/cuda depend on the engine core only, never on each other.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/host_fallback.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/cpu/quant_gemm.h"
#include "engine/cuda/cuda_factory.h"
#include "engine/engine.h"

namespace rnnserve::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  // Process-wide: the CPU engine's kernels and the GPU engine's host fallback run this set.
  if (auto s = cpu::UseCpuKernelSet(options.cpu_kernels); !s.ok()) return s;
  switch (options.kind) {
    case EngineKind::kCpu:
      return cpu::CreateCpuEngine();
    case EngineKind::kCuda:
      return cuda::CreateCudaEngine(options, cpu::NewHostFallback());
  }
  return absl::InvalidArgumentError("unknown engine kind");
}

bool CudaAvailable(std::string* why_not) { return cuda::VisibleGpus(why_not) > 0; }

std::string CpuKernelsNote(CpuWeights weights) {
  const absl::StatusOr<cpu::CpuKernelSet> set = cpu::ActiveCpuKernelSet();
  // A set this CPU lacks leaves the plain one running (and the CPU engine refusing to compile).
  const cpu::CpuKernelSet runs = set.ok() ? *set : cpu::CpuKernelSet::kPlain;
  return absl::StrCat("CPU kernels: ", cpu::CpuKernelSetName(runs),
                      "; CPU weights: ", cpu::CpuWeightsPath(weights));
}

}  // namespace rnnserve::engine
