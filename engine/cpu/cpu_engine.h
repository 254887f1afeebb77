#pragma once

#include <memory>

#include "engine/engine.h"

namespace rnnserve::engine::cpu {

// The Eigen engine: FP32, every core, no padded step computed.
std::unique_ptr<Engine> CreateCpuEngine();

}  // namespace rnnserve::engine::cpu
