#pragma once

// Triton's per-model inference statistics (KServe's ModelStatistics), tallied by a model
// version's ModelMetrics from the same events that feed its Prometheus series, so that both
// views count the same requests whichever front end sent them:
//   RequestFinished() of an inference method (Predict, ModelInfer, Evaluate; any front end)
//                  success / fail: the whole request, handler start to response (fail: one
//                  that named a loaded model and failed, validation included); last_inference
//   QueueLeft()    queue: the wait in the batcher's queue
//   RecordBatch()  compute_infer and batch_stats[batch size]: one engine call each;
//                  execution_count (engine calls) and inference_count (sequences they ran)
//   RecordCodec()  compute_input / compute_output: decoding and validating a request, and
//                  encoding its answer, where the front end measures them
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
  void Queued(absl::Duration waited);
  void Batch(int64_t batch_size, absl::Duration compute);
  void Codec(absl::Duration input, absl::Duration output);
  InferenceStatistics Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  InferenceStatistics stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::metrics
