#include "server/limits/working_memory.h"

#include <algorithm>
#include <type_traits>
#include <variant>

namespace rnnserve::server::limits {
namespace {

// Floats per position a layer's buffers take; `width` is the width before it, and becomes its
// output width.
int64_t LayerWidth(const engine::LayerSpec& spec, int64_t* width) {
  return std::visit(
      [width](const auto& s) -> int64_t {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, engine::RecurrentSpec>) {
          const int64_t dirs = std::max<int64_t>(static_cast<int64_t>(s.directions.size()), 1);
          *width = dirs * s.output_size();
          return dirs * (int64_t{s.gates()} * s.hidden_size + s.output_size());
        } else if constexpr (std::is_same_v<T, engine::DenseSpec>) {
          *width = s.out;
          return s.out;
        } else if constexpr (std::is_same_v<T, engine::Conv1DSpec>) {
          *width = s.out_channels;
          return s.out_channels;
        } else if constexpr (std::is_same_v<T, engine::EmbeddingSpec>) {
          *width = s.dim;
          return s.dim;
        } else {
          return *width;
        }
      },
      spec);
}

}  // namespace

int64_t WorkingBytes(const engine::Model& ir, const engine::Batch& batch) {
  int64_t positions = 0;
  int64_t width = 1;
  for (const engine::Tensor& t : batch.inputs) {
    const engine::Shape& shape = t.shape();
    const int64_t last = shape.size() >= 3 && shape.back() > 0 ? shape.back() : 1;
    positions = std::max(positions, t.num_elements() / last);
    width = std::max(width, last);
  }
  int64_t floats = 0;
  for (const engine::Layer& layer : ir.layers) floats += LayerWidth(layer.spec, &width);
  // Saturates rather than overflows: a batch this large is refused by any budget.
  constexpr int64_t kMax = int64_t{1} << 60;
  if (floats > 0 && positions > kMax / 4 / floats) return kMax;
  return 4 * positions * floats;
}

}  // namespace rnnserve::server::limits
