#include "server/services/kserve/statistics.h"

namespace rnnserve::server::kserve {
namespace {

void To(const metrics::StatDuration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

void FillStatistics(const std::string& model, int64_t version,
                    const metrics::InferenceStatistics& stats, inference::ModelStatistics* out) {
  out->set_name(model);
  out->set_version(std::to_string(version));
  out->set_last_inference(stats.last_inference_ms);
  out->set_inference_count(stats.inference_count);
  out->set_execution_count(stats.execution_count);
  inference::InferStatistics* s = out->mutable_inference_stats();
  To(stats.success, s->mutable_success());
  To(stats.fail, s->mutable_fail());
  To(stats.queue, s->mutable_queue());
  To(stats.compute_input, s->mutable_compute_input());
  To(stats.compute_infer, s->mutable_compute_infer());
  To(stats.compute_output, s->mutable_compute_output());
  for (const auto& [size, d] : stats.batch_compute) {
    inference::InferBatchStatistics* b = out->add_batch_stats();
    b->set_batch_size(static_cast<uint64_t>(size));
    To(d, b->mutable_compute_infer());
  }
}

}  // namespace rnnserve::server::kserve
