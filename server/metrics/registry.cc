#include "server/metrics/registry.h"

namespace rnnserve::server::metrics {

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  return Add(std::make_unique<Family<Counter>>(std::move(name), std::move(help),
                                               std::move(label_names),
                                               [] { return std::make_unique<Counter>(); }));
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  return Add(std::make_unique<Family<Gauge>>(std::move(name), std::move(help),
                                             std::move(label_names),
                                             [] { return std::make_unique<Gauge>(); }));
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> upper_bounds) {
  return Add(std::make_unique<Family<Histogram>>(
      std::move(name), std::move(help), std::move(label_names),
      [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); }));
}

void Registry::AddCollectable(std::unique_ptr<Collectable> c) { Add(std::move(c)); }

std::string Registry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) f->AppendText(&out);
  return out;
}

}  // namespace rnnserve::server::metrics
