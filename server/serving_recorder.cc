#include "server/serving_recorder.h"

#include <utility>

namespace rnnserve::server {

void ServingRecorder::Attach(metrics::ModelMetrics* metrics, std::vector<std::string> engines) {
  metrics_ = metrics;
  engines_ = std::move(engines);
}

void ServingRecorder::Queued() const {
  if (metrics_ != nullptr) metrics_->QueueEntered();
}

void ServingRecorder::LeftQueue(absl::Duration waited) const {
  if (metrics_ != nullptr) metrics_->QueueLeft(waited);
}

void ServingRecorder::Observe(const batching::BatchStats& stats) const {
  if (metrics_ == nullptr) return;
  for (absl::Duration waited : stats.queue_durations) LeftQueue(waited);
  if (!stats.status.ok()) return;
  const bool known = stats.instance >= 0 && stats.instance < static_cast<int>(engines_.size());
  metrics_->RecordBatch({.engine = known ? engines_[stats.instance] : std::string("unknown"),
                         .batch_size = stats.sequences,
                         .real_timesteps = stats.real_steps,
                         .computed_timesteps = stats.computed_steps,
                         .compute = stats.compute});
}

void ServingRecorder::ObserveChunk(const batching::ChunkStats& stats, int64_t active_slots) const {
  if (metrics_ == nullptr) return;
  metrics_->SetActiveSlots(active_slots);
  Observe({.instance = stats.instance,
           .sequences = stats.active,
           .real_steps = stats.real_steps,
           .computed_steps = stats.active * stats.steps,
           .compute = stats.compute,
           .status = stats.status});
  if (!stats.status.ok()) return;
  metrics_->RecordChunk({.active = stats.active,
                         .capacity = stats.capacity,
                         .steps = stats.steps,
                         .first_step_latencies = stats.first_step_latencies});
}

}  // namespace rnnserve::server
