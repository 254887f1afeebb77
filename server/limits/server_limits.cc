#include "server/limits/server_limits.h"

#include <grpcpp/resource_quota.h>

namespace rnnserve::server::limits {

absl::StatusOr<ServerLimits> CreateServerLimits(const ServerFlags& flags) {
  ServerLimits limits;
  auto bytes = ByteBudget::Create({.max_inflight_bytes = flags.max_inflight_bytes,
                                   .fair_floor_percent = flags.fair_floor_percent});
  if (!bytes.ok()) return bytes.status();
  limits.bytes = *std::move(bytes);
  auto concurrency =
      ModelConcurrency::Create({.max_concurrent_per_model = flags.max_concurrent_per_model,
                                .fair_floor_percent = flags.fair_floor_percent});
  if (!concurrency.ok()) return concurrency.status();
  limits.concurrency = *std::move(concurrency);
  auto streams = StreamLimits::Create({.max_streams = flags.max_streams,
                                       .idle_seconds = flags.stream_idle_seconds,
                                       .fair_floor_percent = flags.fair_floor_percent});
  if (!streams.ok()) return streams.status();
  limits.streams = *std::move(streams);
  auto generations = StreamLimits::Create({.max_streams = flags.max_generations,
                                           .idle_seconds = flags.stream_idle_seconds,
                                           .fair_floor_percent = flags.fair_floor_percent,
                                           .calls = "generations open (Generate)",
                                           .flag = "--max-generations"});
  if (!generations.ok()) return generations.status();
  limits.generations = *std::move(generations);
  return limits;
}

void LimitThreads(const ServerFlags& flags, grpc::ServerBuilder* builder) {
  grpc::ResourceQuota quota("rnnserve");
  quota.SetMaxThreads(flags.grpc_max_threads);
  if (flags.grpc_memory_bytes > 0) quota.Resize(static_cast<size_t>(flags.grpc_memory_bytes));
  builder->SetResourceQuota(quota);
}

}  // namespace rnnserve::server::limits
