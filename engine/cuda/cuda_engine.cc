// The CUDA build's side of the engine factory: the cuDNN engine (cuda_model.h) on one GPU.

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_factory.h"
#include "engine/cuda/cuda_model.h"
#include "engine/no_cuda_reason.h"

namespace rnnserve::engine::cuda {
namespace {

class CudaEngine final : public Engine {
 public:
  CudaEngine(int device, std::shared_ptr<const HostFallback> host)
      : device_(device), host_(std::move(host)) {}

  absl::StatusOr<std::unique_ptr<CompiledModel>> Compile(
      const Model& model, const CompileOptions& options) const override {
    return CompileForGpu(model, options, device_, host_);
  }
  std::string name() const override { return absl::StrCat("cuda:", device_); }

 private:
  const int device_;
  const std::shared_ptr<const HostFallback> host_;
};

}  // namespace

int VisibleGpus(std::string* why_not) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_not) {
      int driver = 0, runtime = 0;
      if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
      if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
      *why_not =
          NoCudaDeviceReason(err != cudaSuccess ? cudaGetErrorString(err) : "", driver, runtime);
    }
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const EngineOptions& options,
                                                         std::shared_ptr<const HostFallback> host) {
  if (host == nullptr) return absl::InvalidArgumentError("the GPU engine needs a host fallback");
  std::string why;
  const int gpus = VisibleGpus(&why);
  if (gpus == 0) return absl::UnavailableError(why);
  if (options.device < 0 || options.device >= gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", options.device, " requested; ", gpus, " visible"));
  }
  const size_t cudnn_version = cudnnGetVersion();
  if (cudnn_version / 10000 != CUDNN_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuDNN ", cudnn_version, " loaded; this build needs cuDNN ", CUDNN_MAJOR, ".x"));
  }
  return std::unique_ptr<Engine>(new CudaEngine(options.device, std::move(host)));
}

}  // namespace rnnserve::engine::cuda
