#pragma once

// Triton's per-model inference statistics (KServe's ModelStatistics), tallied by a model
// version's ModelMetrics from the same events that feed its Prometheus series, so that both
// views count the same requests whichever front end sent them:
//   RequestFinished() of an inference method (Predict, ModelInfer, Evaluate; any front end)
//                  success / fail: the whole request, handler start to response (fail: one
//                  that named a loaded model and failed, validation included); last_inference
//   RecordBatch()  batch_stats[batch size]: the engine call's time; execution_count (engine
//                  calls) and inference_count (sequences they ran)
//   RecordPhases() a request's compute_input (decoding and validating it), compute_infer (its
//                  run: any wait in a queue or for an instance, the engine call and the
//                  hand-over of the answer) and compute_output (encoding the answer), recorded
//                  together by the front ends that time them (KServe's), so that their counts
//                  are always equal (perf_analyzer refuses statistics whose counts differ);
//                  queue counts these requests and takes no time of its own (the wait is in
//                  compute_infer, and in rnnserve_queue_duration_seconds)
// Durations are cumulative nanoseconds with a count.

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rnnserve::server::metrics {

struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(absl::Duration d);
};

struct InferenceStatistics {
  uint64_t last_inference_ms = 0;  // Unix time of the last inference request's end
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  StatDuration success, fail, queue, compute_input, compute_infer, compute_output;
  std::map<int64_t, StatDuration> batch_compute;  // by batch size
};

class InferenceTally {
 public:
  void Request(bool ok, absl::Duration total, absl::Time end);
  void Batch(int64_t batch_size, absl::Duration compute);
  void Phases(absl::Duration input, absl::Duration infer, absl::Duration output);
  InferenceStatistics Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  InferenceStatistics stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::metrics
