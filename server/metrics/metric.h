#pragma once

// The three Prometheus value types, each one time series (one label set).
//
// Every update is a relaxed atomic operation: no locks, safe from any thread. A scrape reads
// the atomics one by one, so it may see an observation in a histogram's buckets before its sum;
// the exposition keeps _count equal to the +Inf bucket (both come from the bucket counts).

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace rnnserve::server::metrics {

// A value that only goes up (requests, seconds of CPU, timesteps).
class Counter {
 public:
  // `v` must be >= 0; a negative increment is ignored (a counter never goes down).
  void Increment(double v = 1.0) {
    if (v > 0) value_.fetch_add(v, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue depth, bytes held).
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted in buckets with fixed upper bounds (Prometheus `le`, inclusive), plus
// their sum. The bounds are sorted, finite and unique; +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double v);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Non-cumulative count of bucket i; i == upper_bounds().size() is the +Inf bucket.
  uint64_t bucket_count(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1 buckets
  std::atomic<double> sum_{0.0};
};

// Bounds for latencies: 10 µs to 10 s, steps of 1, 2.5, 5 per decade (19 bounds).
std::vector<double> LatencyBuckets();
// Powers of two from 1 to `max` inclusive (batch sizes).
std::vector<double> PowerOfTwoBuckets(double max);

}  // namespace rnnserve::server::metrics
