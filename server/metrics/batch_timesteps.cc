#include "server/metrics/batch_timesteps.h"

namespace rnnserve::server::metrics {

Timesteps CountTimesteps(const engine::Batch& batch) {
  Timesteps t;
  if (batch.inputs.empty() || batch.inputs[0].shape().empty()) return t;
  const engine::Tensor& first = batch.inputs[0];  // [B, T, ...], or [B, F] without time
  t.batch_size = first.dim(0);
  const int64_t T = first.shape().size() >= 3 ? first.dim(1) : 1;
  t.computed = t.batch_size * T;
  if (batch.lengths.empty()) {
    t.real = t.computed;
  } else {
    for (int32_t len : batch.lengths) t.real += len;
  }
  return t;
}

}  // namespace rnnserve::server::metrics
