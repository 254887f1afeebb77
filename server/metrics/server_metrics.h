#pragma once

// rnnserve's metrics (the names of DESIGN.md, Prometheus conventions: base units, `_total`
// counters, histograms on by default) on prometheus-cpp's registry, and the recording interface
// the request path calls. endpoint.h serves them on /metrics.
//
// Families (labels in braces):
//   rnnserve_requests_total{model,version,method,code}          counter
//   rnnserve_request_duration_seconds{model,version,method}     histogram, 10 µs .. 10 s
//   rnnserve_queue_duration_seconds{model,version}              histogram, 10 µs .. 10 s
//   rnnserve_compute_duration_seconds{model,version,engine}     histogram, 10 µs .. 10 s
//   rnnserve_batch_size{model,version}                          histogram, 1 .. 1024
//   rnnserve_batch_timesteps_real_total{model,version}          counter
//   rnnserve_batch_timesteps_computed_total{model,version}      counter (padding included)
//   rnnserve_queue_depth{model,version}                         gauge
//   rnnserve_queue_capacity{model,version}                      gauge, 0: unbounded
//   rnnserve_inflight_requests{model,version}                   gauge
//   rnnserve_sequences_active{model,version}                    gauge
//   rnnserve_model_loaded{model,version}                        gauge, 1 or 0
//   rnnserve_model_load_duration_seconds{model,version}         gauge, the last load
//   rnnserve_model_memory_bytes{model,version,engine}           gauge, weights + scratch
//   process_cpu_seconds_total, process_resident_memory_bytes, ... (see process_metrics.h)
//   nv_gpu_utilization, nv_gpu_memory_*_bytes, nv_gpu_power_*, ... where NVML loads
//   (gpu_metrics.h)
//
// Every series of a model version exists, at zero, from the moment ModelLoaded() returns, and
// leaves the page when the version is unloaded (ModelUnloaded: UnloadModel, a removed model
// directory, a version its policy no longer selects), as Triton's do. The series themselves are
// kept, hidden, since a request still running on the old version may record into them; loading
// the version again shows them again. So the page holds what is loaded and what failed, and
// `rnnserve_model_loaded == 0` means a failed load, not a replaced version. A family is on the
// page once it has a visible series (prometheus-cpp leaves out empty families).
// Labels are bounded: `model` and `version` come from the repository, never from a request
// (a request for an unknown model is counted with model="" and version=""); `method` is a
// gRPC method name of our services; `code` a gRPC status code name; `engine` an engine name.
//
// RECORDING INTERFACE (used by server/serving_recorder.h for both of a servable's run paths).
// A servable gets its version's ModelMetrics from ModelLoaded() at the end of its load (the
// ServerMetrics comes from main through ServableOptions::metrics; it never dangles), then
// records per event, from any thread. Counters and
// gauges are atomics; a histogram observation takes prometheus-cpp's per-series mutex for a
// bucket and a sum update (bench/results/metrics-histogram-2026-11-23.md: what it costs):
//   QueueEntered()          a request joins the queue            (queue_depth +1)
//   QueueLeft(waited)       it leaves for a batch, or is dropped (queue_depth -1, and the
//                           wait is observed in queue_duration)
//   RecordBatch(stats)      one CompiledModel::Run: batch size, real and computed (padded)
//                           timesteps, compute time per engine
//   SetQueueCapacity(n)     the queue limit, once at start (RESOURCE_EXHAUSTED beyond it)
//   SequenceStarted()/SequenceEnded()   stateful sequences held on the server
// Request counts, durations and in-flight are recorded by the gRPC interceptor
// (grpc_interceptor.h) for every service; a scheduler does not record them. The same events
// keep Triton's statistics of the version (inference_statistics.h: KServe ModelStatistics).

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/inference_statistics.h"

namespace rnnserve::server::metrics {

// What one engine call did.
struct BatchStats {
  std::string engine;              // CompiledModel::engine_name(): "cpu", "cuda"
  int64_t batch_size = 0;          // sequences in the call
  int64_t real_timesteps = 0;      // sum of the sequences' own lengths
  int64_t computed_timesteps = 0;  // batch_size x the padded length the engine was handed
  absl::Duration compute;          // wall time of CompiledModel::Run
};

// What one chunk of step-level (cellular) batching did.
struct ChunkStats {
  int64_t active = 0;    // slots the chunk advanced (in use on the instance, after it ran)
  int64_t capacity = 0;  // slots of the instance
  int64_t steps = 0;     // steps the chunk advanced them by
  // Per sequence that ran its first steps in this chunk: from queued to the end of the chunk.
  std::vector<absl::Duration> first_step_latencies;
};

// A loaded model version, as the repository reports it.
struct ModelLoadInfo {
  std::string name;
  int64_t version = 0;
  absl::Duration load_duration;
  std::vector<std::string> engines;   // one per instance: "cpu", "cuda"
  std::vector<int64_t> memory_bytes;  // one per instance, CompiledModel::memory_bytes()
};

struct Families;

class ModelMetrics {
 public:
  // `serving`: false for the recorder of unmatched requests, which has request series only
  // (no queue, batch or gauge series under model="").
  ModelMetrics(const Families* families, std::string model, std::string version, bool serving);
  ~ModelMetrics();

  void QueueEntered();
  void QueueLeft(absl::Duration waited);
  void SetQueueCapacity(int64_t capacity);
  void RecordBatch(const BatchStats& stats);
  void SequenceStarted();
  void SequenceEnded();
  // Step-level batching: one chunk (rnnserve_cellular_* series, made on first use), and the
  // slots in use across the model's instances.
  void RecordChunk(const ChunkStats& stats);
  void SetActiveSlots(int64_t active);

  // For the gRPC interceptor: one RequestStarted() per RequestFinished().
  void RequestStarted();
  void RequestFinished(absl::string_view method, absl::StatusCode code, absl::Duration duration);
  // A request whose model was never resolved (counted, not in flight).
  void RequestCounted(absl::string_view method, absl::StatusCode code, absl::Duration duration);

  // Creates the series of `engine` (compute time) at zero.
  void AddEngine(const std::string& engine);

  // A front end that times a request's decoding, run and encoding (inference_statistics.h).
  void RecordPhases(absl::Duration input, absl::Duration infer, absl::Duration output) {
    tally_.Phases(input, infer, output);
  }
  // Triton's statistics of this version, from the events above (inference_statistics.h).
  InferenceStatistics Statistics() const { return tally_.Snapshot(); }

 private:
  friend class ServerMetrics;  // creates a loaded version's request series at zero
  // Method names whose series are resolved once and then updated without a lock.
  static constexpr std::array<absl::string_view, 8> kCachedMethods = {
      "Predict",    "StreamPredict", "Evaluate",   "EvaluateStream",
      "ModelInfer", "ModelMetadata", "ModelReady", "ListModels"};
  static constexpr int kCodes = 17;  // gRPC codes OK (0) .. UNAUTHENTICATED (16)
  struct MethodSeries {
    std::atomic<prometheus::Histogram*> duration{nullptr};
    std::array<std::atomic<prometheus::Counter*>, kCodes> requests{};
  };
  prometheus::Counter& RequestCounter(absl::string_view method, absl::StatusCode code);
  prometheus::Histogram& RequestDuration(absl::string_view method);
  prometheus::Histogram& ComputeDuration(const std::string& engine);
  struct CellularSeries;
  const CellularSeries* Cellular();

  const Families* const families_;
  const std::string model_;
  const std::string version_;
  // Null when !serving; the recording calls then do nothing.
  prometheus::Histogram* const queue_duration_;
  prometheus::Histogram* const batch_size_;
  prometheus::Counter* const real_timesteps_;
  prometheus::Counter* const computed_timesteps_;
  prometheus::Gauge* const queue_depth_;
  prometheus::Gauge* const queue_capacity_;
  prometheus::Gauge* const inflight_;
  prometheus::Gauge* const sequences_active_;
  // Per kCachedMethods entry; a pointer once set never changes (families own the series).
  std::array<MethodSeries, kCachedMethods.size()> methods_;
  // Per kCachedEngines entry, like methods_; other engine names take a family lookup.
  static constexpr std::array<absl::string_view, 2> kCachedEngines = {"cpu", "cuda"};
  std::array<std::atomic<prometheus::Histogram*>, kCachedEngines.size()> compute_{};
  // Made by the first RecordChunk or SetActiveSlots (only cellular models have the series).
  absl::Mutex cellular_mu_;
  std::unique_ptr<CellularSeries> cellular_ ABSL_GUARDED_BY(cellular_mu_);
  std::atomic<const CellularSeries*> cellular_ready_{nullptr};
  InferenceTally tally_;
};

class HiddenSeriesFilter;

class ServerMetrics {
 public:
  ServerMetrics();
  ~ServerMetrics();
  // The process's metrics, served by the endpoint main.cc starts.
  static ServerMetrics& Global();

  // What /metrics serves: rnnserve's families (a prometheus::Registry) and the process
  // collector. Register each with a prometheus::Exposer (endpoint.h does).
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;
  // One more collectable (gpu_metrics.h), before the endpoint starts.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> c) ABSL_LOCKS_EXCLUDED(mu_);
  // Those collectables in the text exposition format, as a scrape sees them (without the
  // exposer's own exposer_* families); for logs and tests.
  std::string ExpositionText() const;

  // A version finished loading: rnnserve_model_loaded 1, its load duration, memory per engine,
  // and every series of the version at zero. Returns the version's recorder.
  ModelMetrics& ModelLoaded(const ModelLoadInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  // A version failed to load (version 0: the model's config failed before any version):
  // rnnserve_model_loaded 0.
  void ModelLoadFailed(const std::string& name, int64_t version) ABSL_LOCKS_EXCLUDED(mu_);
  // A version was unloaded, or a model whose load failed was removed (version 0: its config):
  // Find() no longer returns it and its series leave the page (kept hidden until it loads or
  // fails again).
  void ModelUnloaded(const std::string& name, int64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  // The recorder of a loaded version; version 0: the newest loaded. nullptr when not loaded.
  ModelMetrics* Find(absl::string_view name, int64_t version) const ABSL_LOCKS_EXCLUDED(mu_);
  // The recorder for requests that name no loaded model (model="", version="").
  ModelMetrics& unmatched() { return *unmatched_; }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<prometheus::Collectable> process_;
  // registry_ without the series of unloaded versions.
  const std::shared_ptr<HiddenSeriesFilter> visible_;
  std::unique_ptr<Families> families_;
  std::unique_ptr<ModelMetrics> unmatched_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> extra_ ABSL_GUARDED_BY(mu_);
  struct Version {
    std::unique_ptr<ModelMetrics> metrics;  // never freed: recorders must not dangle
    bool loaded = false;
  };
  std::map<std::string, std::map<int64_t, Version>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::metrics
