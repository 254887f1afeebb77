#pragma once

// The seam between the engine factory (engine/factory/) and the CUDA build. Exactly one
// definition is linked: engine/cuda/cuda_engine.cc when CMake finds CUDA and cuDNN,
// engine/cuda/no_cuda.cc otherwise.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/host_fallback.h"

namespace rnnserve::engine::cuda {

// `host` runs the layers and batches the GPU engine places on the host (never null).
absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const EngineOptions& options,
                                                         std::shared_ptr<const HostFallback> host);

// Number of visible GPUs; 0 with the reason in *why_not.
int VisibleGpus(std::string* why_not);

}  // namespace rnnserve::engine::cuda
