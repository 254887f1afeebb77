#pragma once

// Prometheus metrics of the shared sequence store (redis_store.h), in a registry of their own
// that main.cc adds to the /metrics endpoint:
//   rnnserve_sequence_store_duration_seconds{op="acquire"|"release"}  histogram: one round trip
//       to Redis for a chunk (acquire: the epoch, or the record; release: the new record)
//   rnnserve_sequence_store_errors_total{op, code}  round trips that failed the chunk for the
//       store's sake: UNAVAILABLE (Redis unreachable), ABORTED (another replica advanced the
//       sequence meanwhile), DATA_LOSS (a record that does not fit the model), INTERNAL
//   rnnserve_sequence_chunks_from_memory_total  chunks served from this replica's own copy
//   rnnserve_sequences_resumed_from_store_total  chunks whose states were read from Redis (the
//       sequence's previous chunk ran on another replica, or this one forgot it)
//   rnnserve_sequences_lost_total  sequences this replica found lost: held in memory by a
//       replica that stopped without handing them over (--sequence-durability=drain and a
//       SIGKILL, OOM or lost node). Counted where a chunk of one arrives, once per sequence
//       across replicas; always 0 with --sequence-durability=chunk.

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/store/redis_store.h"

namespace prometheus {
class Registry;
}

namespace rnnserve::server::store {

class StoreMetrics {
 public:
  StoreMetrics();
  ~StoreMetrics();
  std::shared_ptr<prometheus::Registry> registry() const;

  // RedisStore::Options::on_round_trip and on_continue.
  void RoundTrip(StoreOp op, absl::Duration took, absl::StatusCode code);
  void Continued(bool from_memory);
  // RedisStore::Options::on_lost.
  void Lost();

 private:
  struct Series;
  std::unique_ptr<Series> series_;
};

}  // namespace rnnserve::server::store
