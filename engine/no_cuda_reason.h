#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace rnnserve::engine {

// Why the CUDA runtime finds no device, in a user's words (CudaAvailable's reason): `cuda_error`
// is the runtime's text (cudaGetErrorString; "CUDA driver version is insufficient for CUDA
// runtime version" is what a host without an NVIDIA driver gets), driver_version
// cudaDriverGetVersion's (0: no NVIDIA driver) and runtime_version cudaRuntimeGetVersion's
// (1000 * major + 10 * minor).
std::string NoCudaDeviceReason(absl::string_view cuda_error, int driver_version,
                               int runtime_version);

}  // namespace rnnserve::engine
