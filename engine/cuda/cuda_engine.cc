// The CUDA build's side of the engine factory. The cuDNN engine itself lives beside this file;
// until it compiles models, a GPU node runs the CPU engine and says so in its metadata.

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_factory.h"

namespace rnnserve::engine::cuda {

int VisibleGpus(std::string* why_not) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_not) {
      *why_not = err != cudaSuccess ? absl::StrCat("no GPU: ", cudaGetErrorString(err))
                                    : std::string("no GPU visible");
    }
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const EngineOptions& options) {
  std::string why;
  const int gpus = VisibleGpus(&why);
  if (gpus == 0) return absl::UnavailableError(why);
  if (options.device < 0 || options.device >= gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", options.device, " requested; ", gpus, " visible"));
  }
  return absl::UnimplementedError(absl::StrCat(
      "cuDNN ", CUDNN_MAJOR, ".", CUDNN_MINOR, " found, but the cuDNN engine does not compile "
      "models yet"));
}

}  // namespace rnnserve::engine::cuda
