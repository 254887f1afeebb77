#pragma once

// The padding policy of the dynamic batcher. An engine that pads (cuDNN) computes every
// sequence of a batch up to the batch's longest, so a batch costs sequences x longest steps
// (computed) while its sequences hold the sum of their lengths (real). A StepBudget admits a
// sequence only while computed <= max_ratio x real, so long and short sequences that arrive
// together end up in different batches (length buckets) and padding stays bounded.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace rnnserve::server::batching {

class StepBudget {
 public:
  // max_ratio >= 1, or 0 for no bound (every sequence fits).
  explicit StepBudget(double max_ratio)
      : max_ratio_milli_(static_cast<int64_t>(std::llround(max_ratio * 1000))) {}

  // Whether a sequence of `length` steps can join without breaking the bound.
  bool Fits(int64_t length) const {
    if (max_ratio_milli_ == 0 || sequences_ == 0) return true;
    const int64_t computed = (sequences_ + 1) * std::max(longest_, length);
    return computed * 1000 <= max_ratio_milli_ * (real_steps_ + length);
  }
  void Add(int64_t length) {
    ++sequences_;
    real_steps_ += length;
    longest_ = std::max(longest_, length);
  }

  int64_t sequences() const { return sequences_; }
  int64_t real_steps() const { return real_steps_; }
  int64_t computed_steps() const { return sequences_ * longest_; }

 private:
  const int64_t max_ratio_milli_;  // the bound in thousandths; 0: none
  int64_t sequences_ = 0;
  int64_t real_steps_ = 0;
  int64_t longest_ = 0;
};

}  // namespace rnnserve::server::batching
