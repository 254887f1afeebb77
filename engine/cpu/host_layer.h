#pragma once

// One non-recurrent layer on the host, as the CPU engine runs it: reads the values the layer
// names as inputs and writes those it names as outputs (tensors with their masks). The CPU
// engine runs every such layer through it; the GPU engine runs through it the layers it has no
// kernel for. Recurrent layers are not handled here (they own per-model kernels).

#include <vector>

#include "absl/status/status.h"
#include "engine/cpu/layers.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// INTERNAL for a recurrent layer or a layer kind with no host form.
absl::Status RunHostLayer(const Layer& layer, std::vector<Value>* values);

}  // namespace rnnserve::engine::cpu
