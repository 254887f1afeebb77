#pragma once

// Per-model inference statistics for the ModelStatistics RPC, kept by the KServe service.
//
// What each duration measures (cumulative, nanoseconds):
//   success / fail  the whole request, from the handler's start to its response (fail: a
//                   request that reached a loaded model and failed, validation included)
//   compute_input   decoding and validating the request
//   compute_infer   the model's run (Servable::RunAsync): any wait for a free instance or in
//                   the batcher's queue, plus the engine call and the hand-over of the
//                   answer (the servable does not report them apart yet)
//   compute_output  encoding the response
//   queue           not measured separately (count only); see compute_infer
// inference_count counts sequences (a request of batch 4 counts 4); execution_count counts
// Servable::Run calls made by this service.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "inference/grpc_service.pb.h"

namespace rnnserve::server::kserve {

struct InferSample {
  bool ok = false;
  int64_t batch_size = 0;  // 0 when the request failed before a batch was formed
  absl::Duration input, infer, output, total;
  absl::Time end;
};

class InferStatisticsRecorder {
 public:
  void Record(const std::string& model, int64_t version, const InferSample& sample);
  // Fills `out` for one model version; zeros for one never called.
  void Fill(const std::string& model, int64_t version, inference::ModelStatistics* out) const;

 private:
  struct Duration {
    uint64_t count = 0;
    uint64_t ns = 0;
    void Add(absl::Duration d);
    void To(inference::StatisticDuration* out) const;
  };
  struct Counters {
    uint64_t last_inference_ms = 0;
    uint64_t inference_count = 0;
    uint64_t execution_count = 0;
    Duration success, fail, queue, input, infer, output;
    std::map<int64_t, Duration> batch_infer;  // by batch size
  };
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int64_t>, Counters> counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::kserve
