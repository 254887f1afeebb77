#include "server/store/store_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>

namespace rnnserve::server::store {
namespace {

using prometheus::Counter;
using prometheus::Histogram;

constexpr std::array<const char*, 2> kOps = {"acquire", "release"};
// The codes a round trip counts as a store error, in the order of Series::errors.
constexpr std::array<absl::StatusCode, 4> kErrorCodes = {
    absl::StatusCode::kUnavailable, absl::StatusCode::kAborted, absl::StatusCode::kDataLoss,
    absl::StatusCode::kInternal};

}  // namespace

struct StoreMetrics::Series {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::array<Histogram*, kOps.size()> duration{};
  std::array<std::array<Counter*, kErrorCodes.size()>, kOps.size()> errors{};
  Counter* from_memory = nullptr;
  Counter* from_store = nullptr;
  Counter* lost = nullptr;
};

StoreMetrics::StoreMetrics() : series_(std::make_unique<Series>()) {
  prometheus::Registry& r = *series_->registry;
  auto& duration = prometheus::BuildHistogram()
                       .Name("rnnserve_sequence_store_duration_seconds")
                       .Help("One round trip to the sequence store for a chunk, by operation")
                       .Register(r);
  auto& errors = prometheus::BuildCounter()
                     .Name("rnnserve_sequence_store_errors_total")
                     .Help("Round trips to the sequence store that failed their chunk")
                     .Register(r);
  // 25 us to 1 s: a loopback round trip is tens of microseconds.
  const Histogram::BucketBoundaries buckets = {25e-6,  50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
                                               2.5e-3, 5e-3,  10e-3,  25e-3,  0.1,    1};
  for (size_t op = 0; op < kOps.size(); ++op) {
    series_->duration[op] = &duration.Add({{"op", kOps[op]}}, buckets);
    for (size_t c = 0; c < kErrorCodes.size(); ++c) {
      series_->errors[op][c] =
          &errors.Add({{"op", kOps[op]}, {"code", absl::StatusCodeToString(kErrorCodes[c])}});
    }
  }
  series_->from_memory = &prometheus::BuildCounter()
                              .Name("rnnserve_sequence_chunks_from_memory_total")
                              .Help("Sequence chunks served from this replica's own copy")
                              .Register(r)
                              .Add({});
  series_->from_store = &prometheus::BuildCounter()
                             .Name("rnnserve_sequences_resumed_from_store_total")
                             .Help("Sequence chunks whose states were read from the store")
                             .Register(r)
                             .Add({});
  series_->lost = &prometheus::BuildCounter()
                       .Name("rnnserve_sequences_lost_total")
                       .Help(
                           "Sequences found lost: held in memory by a replica that stopped "
                           "without handing them over (--sequence-durability=drain)")
                       .Register(r)
                       .Add({});
}

StoreMetrics::~StoreMetrics() = default;

std::shared_ptr<prometheus::Registry> StoreMetrics::registry() const { return series_->registry; }

void StoreMetrics::RoundTrip(StoreOp op, absl::Duration took, absl::StatusCode code) {
  const size_t o = op == StoreOp::kAcquire ? 0 : 1;
  series_->duration[o]->Observe(absl::ToDoubleSeconds(took));
  for (size_t c = 0; c < kErrorCodes.size(); ++c) {
    if (kErrorCodes[c] == code) series_->errors[o][c]->Increment();
  }
}

void StoreMetrics::Continued(bool from_memory) {
  (from_memory ? series_->from_memory : series_->from_store)->Increment();
}

}  // namespace rnnserve::server::store

namespace rnnserve::server::store {

void StoreMetrics::Lost() { series_->lost->Increment(); }

}  // namespace rnnserve::server::store
