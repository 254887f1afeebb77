#include "server/metrics/batch_timesteps.h"

namespace rnnserve::server::metrics {

Timesteps CountTimesteps(const engine::Batch& batch) {
  Timesteps t;
  if (batch.inputs.empty() || batch.inputs[0].shape().empty()) return t;
  const engine::Tensor& first = batch.inputs[0];
  t.batch_size = first.dim(0);
  // The time axis of the first sequence input: [B, T, F...] values or [B, T] token ids; a
  // model whose inputs are all [B, F] values has none (one step per sequence).
  int64_t T = 1;
  for (const engine::Tensor& in : batch.inputs) {
    if (in.rank() >= 3 || (in.rank() == 2 && in.dtype() == engine::DType::kInt64)) {
      T = in.dim(1);
      break;
    }
  }
  t.computed = t.batch_size * T;
  if (batch.lengths.empty()) {
    t.real = t.computed;
  } else {
    for (int32_t len : batch.lengths) t.real += len;
  }
  return t;
}

}  // namespace rnnserve::server::metrics
