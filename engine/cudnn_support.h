#pragma once

// Which recurrent layers cuDNN computes exactly as the source framework does. Plain C++ (no
// CUDA headers): `rnnserve-cli inspect` and the metadata of CPU-only builds use it too.

#include "absl/status/status.h"
#include "engine/ir.h"

namespace rnnserve::engine {

// OK when cudnnRNNForward computes `spec` exactly; otherwise UNIMPLEMENTED with the reason.
absl::Status CudnnSupports(const RecurrentSpec& spec);

}  // namespace rnnserve::engine
