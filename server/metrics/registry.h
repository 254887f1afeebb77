#pragma once

// A set of metric families rendered together as one /metrics page.
//
// Families are added at start-up and live as long as the registry; Add* returns a reference
// that stays valid. Render() may run on the exposer's thread while other threads update
// series: every family guards its own series map, and values are atomics.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/family.h"

namespace rnnserve::server::metrics {

class Registry {
 public:
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  // `upper_bounds`: sorted, finite, unique; +Inf is added.
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> upper_bounds);
  // A family that computes its samples at scrape time (process CPU and memory).
  void AddCollectable(std::unique_ptr<Collectable> c);

  // The whole page in the text exposition format 0.0.4, families in the order added.
  std::string Render() const;

 private:
  template <typename T>
  T& Add(std::unique_ptr<T> family) {
    T& ref = *family;
    absl::MutexLock lock(&mu_);
    families_.push_back(std::move(family));
    return ref;
  }

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Collectable>> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::metrics
