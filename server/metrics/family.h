#pragma once

// A metric family: one name, one help text, fixed label names, and one series per distinct
// label-value tuple. WithLabels() creates a series at zero on first use and returns the same
// object afterwards; the reference stays valid for the family's lifetime, so callers resolve
// a series once and update it lock-free from then on.
//
// Keep label values bounded (model, version, method, code, engine): every distinct tuple is a
// series for ever. Never put request ids or user-chosen strings in a label.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/metric.h"
#include "server/metrics/text_format.h"

namespace rnnserve::server::metrics {

// Anything a registry can render.
class Collectable {
 public:
  virtual ~Collectable() = default;
  // Appends "# HELP", "# TYPE" and every sample of this family.
  virtual void AppendText(std::string* out) const = 0;
};

template <typename T>
class Family final : public Collectable {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<T>()> make)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        make_(std::move(make)) {}

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // `values` has one entry per label name, in the same order; a wrong count is a programming
  // error and is padded or cut to fit (a metric must never crash the server).
  T& WithLabels(std::vector<std::string> values) ABSL_LOCKS_EXCLUDED(mu_) {
    values.resize(label_names_.size());
    absl::MutexLock lock(&mu_);
    std::unique_ptr<T>& slot = series_[std::move(values)];
    if (!slot) slot = make_();
    return *slot;
  }

  void AppendText(std::string* out) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<T>()> make_;

  mutable absl::Mutex mu_;
  // Sorted by label values, so the exposition is stable from scrape to scrape.
  std::map<std::vector<std::string>, std::unique_ptr<T>> series_ ABSL_GUARDED_BY(mu_);
};

template <>
inline void Family<Counter>::AppendText(std::string* out) const {
  AppendHeader(name_, help_, "counter", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, c] : series_)
    AppendSample(name_, label_names_, values, c->value(), out);
}

template <>
inline void Family<Gauge>::AppendText(std::string* out) const {
  AppendHeader(name_, help_, "gauge", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, g] : series_)
    AppendSample(name_, label_names_, values, g->value(), out);
}

template <>
inline void Family<Histogram>::AppendText(std::string* out) const {
  AppendHeader(name_, help_, "histogram", out);
  const std::string bucket = name_ + "_bucket";
  absl::MutexLock lock(&mu_);
  for (const auto& [values, h] : series_) {
    const std::vector<double>& bounds = h->upper_bounds();
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += h->bucket_count(i);
      AppendSample(bucket, label_names_, values, static_cast<double>(cumulative), out, "le",
                   i < bounds.size() ? FormatValue(bounds[i]) : "+Inf");
    }
    AppendSample(name_ + "_sum", label_names_, values, h->sum(), out);
    AppendSample(name_ + "_count", label_names_, values, static_cast<double>(cumulative), out);
  }
}

}  // namespace rnnserve::server::metrics
