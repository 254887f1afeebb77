#include "server/metrics/server_metrics.h"

#include <algorithm>

#include "server/metrics/process_metrics.h"

namespace rnnserve::server::metrics {

// The families every ModelMetrics writes to; owned by the ServerMetrics' registry.
struct Families {
  Family<Counter>& requests;
  Family<Histogram>& request_duration;
  Family<Histogram>& queue_duration;
  Family<Histogram>& compute_duration;
  Family<Histogram>& batch_size;
  Family<Counter>& real_timesteps;
  Family<Counter>& computed_timesteps;
  Family<Gauge>& queue_depth;
  Family<Gauge>& queue_capacity;
  Family<Gauge>& inflight;
  Family<Gauge>& sequences_active;
  Family<Gauge>& model_loaded;
  Family<Gauge>& load_duration;
  Family<Gauge>& memory;
};

namespace {

using Labels = std::vector<std::string>;

const Labels kModel = {"model", "version"};

std::string CodeName(absl::StatusCode code) {
  // absl's names are gRPC's (OK, INVALID_ARGUMENT, ...); codes share their numbering.
  std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

template <size_t N>
int IndexOf(const std::array<absl::string_view, N>& names, absl::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// Resolves a series once into `slot`; later calls read the atomic without a lock.
template <typename T, typename Make>
T& Cached(std::atomic<T*>& slot, Make make) {
  T* p = slot.load(std::memory_order_acquire);
  if (p == nullptr) {
    p = &make();  // WithLabels returns the same object to every racing caller
    slot.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

ModelMetrics::ModelMetrics(const Families* f, std::string model, std::string version, bool serving)
    : families_(f),
      model_(std::move(model)),
      version_(std::move(version)),
      queue_duration_(serving ? &f->queue_duration.WithLabels({model_, version_}) : nullptr),
      batch_size_(serving ? &f->batch_size.WithLabels({model_, version_}) : nullptr),
      real_timesteps_(serving ? &f->real_timesteps.WithLabels({model_, version_}) : nullptr),
      computed_timesteps_(serving ? &f->computed_timesteps.WithLabels({model_, version_})
                                  : nullptr),
      queue_depth_(serving ? &f->queue_depth.WithLabels({model_, version_}) : nullptr),
      queue_capacity_(serving ? &f->queue_capacity.WithLabels({model_, version_}) : nullptr),
      inflight_(serving ? &f->inflight.WithLabels({model_, version_}) : nullptr),
      sequences_active_(serving ? &f->sequences_active.WithLabels({model_, version_}) : nullptr) {}

void ModelMetrics::QueueEntered() {
  if (queue_depth_ != nullptr) queue_depth_->Add(1);
}

void ModelMetrics::QueueLeft(absl::Duration waited) {
  if (queue_depth_ == nullptr) return;
  queue_depth_->Add(-1);
  queue_duration_->Observe(absl::ToDoubleSeconds(waited));
}

void ModelMetrics::SetQueueCapacity(int64_t capacity) {
  if (queue_capacity_ != nullptr) queue_capacity_->Set(static_cast<double>(capacity));
}

void ModelMetrics::RecordBatch(const BatchStats& stats) {
  if (batch_size_ == nullptr) return;
  batch_size_->Observe(static_cast<double>(stats.batch_size));
  real_timesteps_->Increment(static_cast<double>(stats.real_timesteps));
  computed_timesteps_->Increment(static_cast<double>(stats.computed_timesteps));
  ComputeDuration(stats.engine).Observe(absl::ToDoubleSeconds(stats.compute));
}

void ModelMetrics::SequenceStarted() {
  if (sequences_active_ != nullptr) sequences_active_->Add(1);
}

void ModelMetrics::SequenceEnded() {
  if (sequences_active_ != nullptr) sequences_active_->Add(-1);
}

void ModelMetrics::RequestStarted() {
  if (inflight_ != nullptr) inflight_->Add(1);
}

void ModelMetrics::RequestFinished(absl::string_view method, absl::StatusCode code,
                                   absl::Duration duration) {
  if (inflight_ != nullptr) inflight_->Add(-1);
  RequestCounted(method, code, duration);
}

void ModelMetrics::RequestCounted(absl::string_view method, absl::StatusCode code,
                                  absl::Duration duration) {
  RequestCounter(method, code).Increment();
  RequestDuration(method).Observe(absl::ToDoubleSeconds(duration));
}

void ModelMetrics::AddEngine(const std::string& engine) { ComputeDuration(engine); }

Counter& ModelMetrics::RequestCounter(absl::string_view method, absl::StatusCode code) {
  auto make = [&]() -> Counter& {
    return families_->requests.WithLabels({model_, version_, std::string(method), CodeName(code)});
  };
  const int m = IndexOf(kCachedMethods, method);
  const int c = static_cast<int>(code);
  if (m < 0 || c < 0 || c >= kCodes) return make();
  return Cached(methods_[static_cast<size_t>(m)].requests[static_cast<size_t>(c)], make);
}

Histogram& ModelMetrics::RequestDuration(absl::string_view method) {
  auto make = [&]() -> Histogram& {
    return families_->request_duration.WithLabels({model_, version_, std::string(method)});
  };
  const int m = IndexOf(kCachedMethods, method);
  if (m < 0) return make();
  return Cached(methods_[static_cast<size_t>(m)].duration, make);
}

Histogram& ModelMetrics::ComputeDuration(const std::string& engine) {
  auto make = [&]() -> Histogram& {
    return families_->compute_duration.WithLabels({model_, version_, engine});
  };
  const int e = IndexOf(kCachedEngines, engine);
  if (e < 0) return make();
  return Cached(compute_[static_cast<size_t>(e)], make);
}

ServerMetrics::ServerMetrics() {
  Registry& r = registry_;
  const std::vector<double> latency = LatencyBuckets();
  families_.reset(new Families{
      .requests = r.AddCounter("rnnserve_requests_total",
                               "Requests answered, by model version, gRPC method and status code.",
                               {"model", "version", "method", "code"}),
      .request_duration =
          r.AddHistogram("rnnserve_request_duration_seconds",
                         "Time from receiving a request to sending its status, in seconds.",
                         {"model", "version", "method"}, latency),
      .queue_duration =
          r.AddHistogram("rnnserve_queue_duration_seconds",
                         "Time a request waited for a batch or a free model instance, in seconds.",
                         kModel, latency),
      .compute_duration = r.AddHistogram("rnnserve_compute_duration_seconds",
                                         "Time of one engine call on a batch, in seconds.",
                                         {"model", "version", "engine"}, latency),
      .batch_size = r.AddHistogram("rnnserve_batch_size", "Sequences per engine call.", kModel,
                                   PowerOfTwoBuckets(1024)),
      .real_timesteps =
          r.AddCounter("rnnserve_batch_timesteps_real_total",
                       "Timesteps of the sequences themselves (their lengths).", kModel),
      .computed_timesteps = r.AddCounter(
          "rnnserve_batch_timesteps_computed_total",
          "Timesteps of the batches handed to engines: batch size times padded length.", kModel),
      .queue_depth = r.AddGauge("rnnserve_queue_depth", "Requests waiting to run.", kModel),
      .queue_capacity = r.AddGauge("rnnserve_queue_capacity",
                                   "Most requests the queue holds; 0: unbounded.", kModel),
      .inflight = r.AddGauge("rnnserve_inflight_requests",
                             "Requests received and not yet answered.", kModel),
      .sequences_active = r.AddGauge("rnnserve_sequences_active",
                                     "Stateful sequences whose state the server holds.", kModel),
      .model_loaded =
          r.AddGauge("rnnserve_model_loaded",
                     "1 while the model version serves, 0 when it failed or left.", kModel),
      .load_duration =
          r.AddGauge("rnnserve_model_load_duration_seconds",
                     "Time the last load of the model version took, in seconds.", kModel),
      .memory = r.AddGauge("rnnserve_model_memory_bytes",
                           "Bytes of weights and scratch the version's instances hold, by engine "
                           "(engine=\"cuda\": GPU memory).",
                           {"model", "version", "engine"}),
  });
  r.AddCollectable(NewProcessCollector());
  unmatched_ = std::make_unique<ModelMetrics>(families_.get(), "", "", false);
}

ServerMetrics::~ServerMetrics() = default;

ServerMetrics& ServerMetrics::Global() {
  static ServerMetrics* const metrics = new ServerMetrics();  // never destroyed: used at exit
  return *metrics;
}

ModelMetrics& ServerMetrics::ModelLoaded(const ModelLoadInfo& info) {
  const std::string version = std::to_string(info.version);
  ModelMetrics* m;
  {
    absl::MutexLock lock(&mu_);
    Version& v = models_[info.name][info.version];
    if (!v.metrics)
      v.metrics = std::make_unique<ModelMetrics>(families_.get(), info.name, version, true);
    v.loaded = true;
    m = v.metrics.get();
  }
  families_->load_duration.WithLabels({info.name, version})
      .Set(absl::ToDoubleSeconds(info.load_duration));
  std::map<std::string, double> bytes;
  for (size_t i = 0; i < info.engines.size(); ++i) {
    bytes[info.engines[i]] +=
        i < info.memory_bytes.size() ? static_cast<double>(info.memory_bytes[i]) : 0.0;
  }
  for (const auto& [engine, b] : bytes) {
    families_->memory.WithLabels({info.name, version, engine}).Set(b);
    m->AddEngine(engine);
  }
  for (absl::string_view method : {"Predict", "Evaluate", "ModelMetadata"}) {
    m->RequestDuration(method);
    m->RequestCounter(method, absl::StatusCode::kOk);
  }
  families_->model_loaded.WithLabels({info.name, version}).Set(1);
  return *m;
}

void ServerMetrics::ModelLoadFailed(const std::string& name, int64_t version) {
  families_->model_loaded.WithLabels({name, version > 0 ? std::to_string(version) : ""}).Set(0);
}

void ServerMetrics::ModelUnloaded(const std::string& name, int64_t version) {
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    auto v = it->second.find(version);
    if (v == it->second.end()) return;
    v->second.loaded = false;
  }
  families_->model_loaded.WithLabels({name, std::to_string(version)}).Set(0);
}

ModelMetrics* ServerMetrics::Find(absl::string_view name, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return nullptr;
  if (version == 0) {
    for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) {
      if (v->second.loaded) return v->second.metrics.get();
    }
    return nullptr;
  }
  auto v = it->second.find(version);
  return v != it->second.end() && v->second.loaded ? v->second.metrics.get() : nullptr;
}

}  // namespace rnnserve::server::metrics
