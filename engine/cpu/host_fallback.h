#pragma once

// The CPU engine's side of engine/host_fallback.h: its recurrent kernel (recurrent.h, one
// thread, FP32 weights) and its host layers (host_layer.h), for an engine that borrows them.
// The engine factory (engine/factory/) hands it to the GPU engine.

#include <memory>

#include "engine/host_fallback.h"

namespace rnnserve::engine::cpu {

std::shared_ptr<const HostFallback> NewHostFallback();

}  // namespace rnnserve::engine::cpu
