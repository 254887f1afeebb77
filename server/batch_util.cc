#include "server/batch_util.h"

#include <algorithm>

namespace rnnserve::server {

engine::Tensor SliceRows(const engine::Tensor& t, int64_t begin, int64_t end) {
  engine::Shape shape = t.shape();
  const int64_t row = shape[0] == 0 ? 0 : t.num_elements() / shape[0];
  shape[0] = end - begin;
  if (t.dtype() == engine::DType::kInt64) {
    return engine::Tensor::Int64(shape,
                                 std::vector<int64_t>(t.i64() + begin * row, t.i64() + end * row));
  }
  return engine::Tensor::Float(shape,
                               std::vector<float>(t.f32() + begin * row, t.f32() + end * row));
}

engine::Batch SliceBatch(const engine::Batch& batch, int64_t begin, int64_t end) {
  engine::Batch out;
  out.continues = batch.continues;
  for (const engine::Tensor& t : batch.inputs) out.inputs.push_back(SliceRows(t, begin, end));
  if (!batch.lengths.empty()) {
    out.lengths.assign(batch.lengths.begin() + begin, batch.lengths.begin() + end);
  }
  for (const auto& [layer, states] : batch.initial_states) {
    for (const engine::Tensor& t : states) {
      out.initial_states[layer].push_back(SliceRows(t, begin, end));
    }
  }
  return out;
}

engine::Tensor ConcatRows(const std::vector<engine::Tensor>& parts) {
  if (parts.size() == 1) return parts[0];
  engine::Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const engine::Tensor& p : parts) shape[0] += p.dim(0);
  if (parts[0].dtype() == engine::DType::kInt64) {
    std::vector<int64_t> v;
    for (const engine::Tensor& p : parts) v.insert(v.end(), p.i64(), p.i64() + p.num_elements());
    return engine::Tensor::Int64(shape, std::move(v));
  }
  std::vector<float> v;
  v.reserve(engine::NumElements(shape));
  for (const engine::Tensor& p : parts) v.insert(v.end(), p.f32(), p.f32() + p.num_elements());
  return engine::Tensor::Float(shape, std::move(v));
}

}  // namespace rnnserve::server
