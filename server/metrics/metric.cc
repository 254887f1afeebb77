#include "server/metrics/metric.h"

#include <algorithm>
#include <cmath>

namespace rnnserve::server::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::Observe(double v) {
  // First bound >= v: `le` is inclusive. NaN compares false with every bound: +Inf.
  const size_t i = std::isnan(v)
                       ? bounds_.size()
                       : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                             bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<double> LatencyBuckets() {
  // Written out: repeated multiplication would print bounds like 0.00010000000000000002.
  return {1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
          2.5e-2, 5e-2,   1e-1, 2.5e-1, 5e-1,   1.0,  2.5,  5.0,    10.0};
}

std::vector<double> PowerOfTwoBuckets(double max) {
  std::vector<double> b;
  for (double v = 1; v <= max; v *= 2) b.push_back(v);
  return b;
}

}  // namespace rnnserve::server::metrics
