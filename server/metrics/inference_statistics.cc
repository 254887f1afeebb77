#include "server/metrics/inference_statistics.h"

#include <algorithm>

namespace rnnserve::server::metrics {

void StatDuration::Add(absl::Duration d) {
  ++count;
  ns += static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
}

void InferenceTally::Request(bool ok, absl::Duration total, absl::Time end) {
  absl::MutexLock lock(&mu_);
  stats_.last_inference_ms = static_cast<uint64_t>(std::max<int64_t>(0, absl::ToUnixMillis(end)));
  (ok ? stats_.success : stats_.fail).Add(total);
}

void InferenceTally::Batch(int64_t batch_size, absl::Duration compute) {
  absl::MutexLock lock(&mu_);
  ++stats_.execution_count;
  stats_.inference_count += static_cast<uint64_t>(std::max<int64_t>(0, batch_size));
  stats_.batch_compute[batch_size].Add(compute);
}

void InferenceTally::Phases(absl::Duration input, absl::Duration infer, absl::Duration output) {
  absl::MutexLock lock(&mu_);
  ++stats_.queue.count;
  stats_.compute_input.Add(input);
  stats_.compute_infer.Add(infer);
  stats_.compute_output.Add(output);
}

InferenceStatistics InferenceTally::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace rnnserve::server::metrics
