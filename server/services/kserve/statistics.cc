#include "server/services/kserve/statistics.h"

#include <algorithm>

namespace rnnserve::server::kserve {

void InferStatisticsRecorder::Duration::Add(absl::Duration d) {
  ++count;
  ns += static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
}

void InferStatisticsRecorder::Duration::To(inference::StatisticDuration* out) const {
  out->set_count(count);
  out->set_ns(ns);
}

void InferStatisticsRecorder::Record(const std::string& model, int64_t version,
                                     const InferSample& sample) {
  absl::MutexLock lock(&mu_);
  Counters& c = counters_[{model, version}];
  c.last_inference_ms = static_cast<uint64_t>(absl::ToUnixMillis(sample.end));
  if (!sample.ok) {
    c.fail.Add(sample.total);
    return;
  }
  c.success.Add(sample.total);
  c.inference_count += static_cast<uint64_t>(sample.batch_size);
  ++c.execution_count;
  ++c.queue.count;
  c.input.Add(sample.input);
  c.infer.Add(sample.infer);
  c.output.Add(sample.output);
  c.batch_infer[sample.batch_size].Add(sample.infer);
}

void InferStatisticsRecorder::Fill(const std::string& model, int64_t version,
                                   inference::ModelStatistics* out) const {
  out->set_name(model);
  out->set_version(std::to_string(version));
  absl::MutexLock lock(&mu_);
  auto it = counters_.find({model, version});
  const Counters empty;
  const Counters& c = it == counters_.end() ? empty : it->second;
  out->set_last_inference(c.last_inference_ms);
  out->set_inference_count(c.inference_count);
  out->set_execution_count(c.execution_count);
  inference::InferStatistics* s = out->mutable_inference_stats();
  c.success.To(s->mutable_success());
  c.fail.To(s->mutable_fail());
  c.queue.To(s->mutable_queue());
  c.input.To(s->mutable_compute_input());
  c.infer.To(s->mutable_compute_infer());
  c.output.To(s->mutable_compute_output());
  for (const auto& [size, d] : c.batch_infer) {
    inference::InferBatchStatistics* b = out->add_batch_stats();
    b->set_batch_size(static_cast<uint64_t>(size));
    d.To(b->mutable_compute_infer());
  }
}

}  // namespace rnnserve::server::kserve
