#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

#include "absl/time/clock.h"
#include "prometheus/family.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/process_metrics.h"

namespace rnnserve::server::metrics {

// The families every ModelMetrics writes to; owned by the ServerMetrics' registry.
struct Families {
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& request_duration;
  prometheus::Family<prometheus::Histogram>& queue_duration;
  prometheus::Family<prometheus::Histogram>& compute_duration;
  prometheus::Family<prometheus::Histogram>& batch_size;
  prometheus::Family<prometheus::Counter>& real_timesteps;
  prometheus::Family<prometheus::Counter>& computed_timesteps;
  prometheus::Family<prometheus::Gauge>& queue_depth;
  prometheus::Family<prometheus::Gauge>& queue_capacity;
  prometheus::Family<prometheus::Gauge>& inflight;
  prometheus::Family<prometheus::Gauge>& sequences_active;
  prometheus::Family<prometheus::Gauge>& model_loaded;
  prometheus::Family<prometheus::Gauge>& load_duration;
  prometheus::Family<prometheus::Gauge>& memory;
  prometheus::Family<prometheus::Gauge>& cellular_active;
  prometheus::Family<prometheus::Histogram>& cellular_chunk_steps;
  prometheus::Family<prometheus::Histogram>& cellular_utilization;
  prometheus::Family<prometheus::Histogram>& first_step;
};

namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Bounds for latencies: 10 µs to 10 s, steps of 1, 2.5, 5 per decade (19 bounds). Written out:
// repeated multiplication would print bounds like 0.00010000000000000002.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const b = new Histogram::BucketBoundaries{
      1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
      2.5e-2, 5e-2,   1e-1, 2.5e-1, 5e-1,   1.0,  2.5,  5.0,    10.0};
  return *b;
}

// Batch sizes: powers of two from 1 to 1024.
const Histogram::BucketBoundaries& BatchSizeBuckets() {
  static const auto* const b = [] {
    auto* v = new Histogram::BucketBoundaries;
    for (double x = 1; x <= 1024; x *= 2) v->push_back(x);
    return v;
  }();
  return *b;
}

Labels ModelLabels(const std::string& model, const std::string& version) {
  return {{"model", model}, {"version", version}};
}

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
    p = &make();  // Family::Add returns the same object to every racing caller
    slot.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

// The registry's families without the series of hidden (unloaded) model versions.
class HiddenSeriesFilter final : public prometheus::Collectable {
 public:
  explicit HiddenSeriesFilter(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  void Hide(const std::string& model, const std::string& version) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    hidden_.emplace(model, version);
  }
  void Show(const std::string& model, const std::string& version) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    hidden_.erase({model, version});
  }

  std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    absl::MutexLock lock(&mu_);
    if (hidden_.empty()) return families;
    for (prometheus::MetricFamily& f : families) {
      std::erase_if(
          f.metric, [this](const prometheus::ClientMetric& m) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            const std::string* model = nullptr;
            const std::string* version = nullptr;
            for (const prometheus::ClientMetric::Label& l : m.label) {
              if (l.name == "model") model = &l.value;
              if (l.name == "version") version = &l.value;
            }
            return model != nullptr && version != nullptr && hidden_.contains({*model, *version});
          });
    }
    std::erase_if(families, [](const prometheus::MetricFamily& f) { return f.metric.empty(); });
    return families;
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::set<std::pair<std::string, std::string>> hidden_ ABSL_GUARDED_BY(mu_);
};

ModelMetrics::ModelMetrics(const Families* f, std::string model, std::string version, bool serving)
    : families_(f),
      model_(std::move(model)),
      version_(std::move(version)),
      queue_duration_(serving
                          ? &f->queue_duration.Add(ModelLabels(model_, version_), LatencyBuckets())
                          : nullptr),
      batch_size_(serving ? &f->batch_size.Add(ModelLabels(model_, version_), BatchSizeBuckets())
                          : nullptr),
      real_timesteps_(serving ? &f->real_timesteps.Add(ModelLabels(model_, version_)) : nullptr),
      computed_timesteps_(serving ? &f->computed_timesteps.Add(ModelLabels(model_, version_))
                                  : nullptr),
      queue_depth_(serving ? &f->queue_depth.Add(ModelLabels(model_, version_)) : nullptr),
      queue_capacity_(serving ? &f->queue_capacity.Add(ModelLabels(model_, version_)) : nullptr),
      inflight_(serving ? &f->inflight.Add(ModelLabels(model_, version_)) : nullptr),
      sequences_active_(serving ? &f->sequences_active.Add(ModelLabels(model_, version_))
                                : nullptr) {}

void ModelMetrics::QueueEntered() {
  if (queue_depth_ != nullptr) queue_depth_->Increment();
}

void ModelMetrics::QueueLeft(absl::Duration waited) {
  if (queue_depth_ == nullptr) return;
  queue_depth_->Decrement();
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
  tally_.Batch(stats.batch_size, stats.compute);
}

ModelMetrics::~ModelMetrics() = default;

struct ModelMetrics::CellularSeries {
  prometheus::Gauge* active;
  prometheus::Histogram* chunk_steps;
  prometheus::Histogram* utilization;
  prometheus::Histogram* first_step;
};

const ModelMetrics::CellularSeries* ModelMetrics::Cellular() {
  if (const CellularSeries* s = cellular_ready_.load(std::memory_order_acquire)) return s;
  absl::MutexLock lock(&cellular_mu_);
  if (cellular_ == nullptr) {
    static const auto* const utilization =
        new Histogram::BucketBoundaries{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    const Labels labels = ModelLabels(model_, version_);
    cellular_.reset(new CellularSeries{
        .active = &families_->cellular_active.Add(labels),
        .chunk_steps = &families_->cellular_chunk_steps.Add(labels, BatchSizeBuckets()),
        .utilization = &families_->cellular_utilization.Add(labels, *utilization),
        .first_step = &families_->first_step.Add(labels, LatencyBuckets())});
    cellular_ready_.store(cellular_.get(), std::memory_order_release);
  }
  return cellular_.get();
}

void ModelMetrics::RecordChunk(const ChunkStats& stats) {
  if (batch_size_ == nullptr) return;
  const CellularSeries* s = Cellular();
  s->chunk_steps->Observe(static_cast<double>(stats.steps));
  if (stats.capacity > 0) {
    s->utilization->Observe(static_cast<double>(stats.active) /
                            static_cast<double>(stats.capacity));
  }
  for (absl::Duration d : stats.first_step_latencies) {
    s->first_step->Observe(absl::ToDoubleSeconds(d));
  }
}

void ModelMetrics::SetActiveSlots(int64_t active) {
  if (batch_size_ == nullptr) return;
  Cellular()->active->Set(static_cast<double>(active));
}

void ModelMetrics::SequenceStarted() {
  if (sequences_active_ != nullptr) sequences_active_->Increment();
}

void ModelMetrics::SequenceEnded() {
  if (sequences_active_ != nullptr) sequences_active_->Decrement();
}

void ModelMetrics::RequestStarted() {
  if (inflight_ != nullptr) inflight_->Increment();
}

void ModelMetrics::RequestFinished(absl::string_view method, absl::StatusCode code,
                                   absl::Duration duration) {
  if (inflight_ != nullptr) inflight_->Decrement();
  RequestCounted(method, code, duration);
  if (method == "Predict" || method == "ModelInfer" || method == "Evaluate") {
    tally_.Request(code == absl::StatusCode::kOk, duration, absl::Now());
  }
}

void ModelMetrics::RequestCounted(absl::string_view method, absl::StatusCode code,
                                  absl::Duration duration) {
  RequestCounter(method, code).Increment();
  RequestDuration(method).Observe(absl::ToDoubleSeconds(duration));
}

void ModelMetrics::AddEngine(const std::string& engine) { ComputeDuration(engine); }

Counter& ModelMetrics::RequestCounter(absl::string_view method, absl::StatusCode code) {
  auto make = [&]() -> Counter& {
    return families_->requests.Add({{"model", model_},
                                    {"version", version_},
                                    {"method", std::string(method)},
                                    {"code", CodeName(code)}});
  };
  const int m = IndexOf(kCachedMethods, method);
  const int c = static_cast<int>(code);
  if (m < 0 || c < 0 || c >= kCodes) return make();
  return Cached(methods_[static_cast<size_t>(m)].requests[static_cast<size_t>(c)], make);
}

Histogram& ModelMetrics::RequestDuration(absl::string_view method) {
  auto make = [&]() -> Histogram& {
    return families_->request_duration.Add(
        {{"model", model_}, {"version", version_}, {"method", std::string(method)}},
        LatencyBuckets());
  };
  const int m = IndexOf(kCachedMethods, method);
  if (m < 0) return make();
  return Cached(methods_[static_cast<size_t>(m)].duration, make);
}

Histogram& ModelMetrics::ComputeDuration(const std::string& engine) {
  auto make = [&]() -> Histogram& {
    return families_->compute_duration.Add(
        {{"model", model_}, {"version", version_}, {"engine", engine}}, LatencyBuckets());
  };
  const int e = IndexOf(kCachedEngines, engine);
  if (e < 0) return make();
  return Cached(compute_[static_cast<size_t>(e)], make);
}

ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_(NewProcessCollector()),
      visible_(std::make_shared<HiddenSeriesFilter>(registry_)) {
  prometheus::Registry& r = *registry_;
  auto counter = [&r](const char* name, const char* help) -> prometheus::Family<Counter>& {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r);
  };
  auto gauge = [&r](const char* name, const char* help) -> prometheus::Family<Gauge>& {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
  };
  auto histogram = [&r](const char* name, const char* help) -> prometheus::Family<Histogram>& {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
  };
  families_.reset(new Families{
      .requests = counter("rnnserve_requests_total",
                          "Requests answered, by model version, gRPC method and status code."),
      .request_duration =
          histogram("rnnserve_request_duration_seconds",
                    "Time from receiving a request to sending its status, in seconds."),
      .queue_duration =
          histogram("rnnserve_queue_duration_seconds",
                    "Time a request waited for a batch or a free model instance, in seconds."),
      .compute_duration = histogram("rnnserve_compute_duration_seconds",
                                    "Time of one engine call on a batch, in seconds."),
      .batch_size = histogram("rnnserve_batch_size", "Sequences per engine call."),
      .real_timesteps = counter("rnnserve_batch_timesteps_real_total",
                                "Timesteps of the sequences themselves (their lengths)."),
      .computed_timesteps =
          counter("rnnserve_batch_timesteps_computed_total",
                  "Timesteps of the batches handed to engines: batch size times padded length."),
      .queue_depth = gauge("rnnserve_queue_depth", "Requests waiting to run."),
      .queue_capacity =
          gauge("rnnserve_queue_capacity", "Most requests the queue holds; 0: unbounded."),
      .inflight = gauge("rnnserve_inflight_requests", "Requests received and not yet answered."),
      .sequences_active =
          gauge("rnnserve_sequences_active", "Stateful sequences whose state the server holds."),
      .model_loaded = gauge("rnnserve_model_loaded",
                            "1 while the model version serves, 0 when it failed or left."),
      .load_duration = gauge("rnnserve_model_load_duration_seconds",
                             "Time the last load of the model version took, in seconds."),
      .memory = gauge("rnnserve_model_memory_bytes",
                      "Bytes of weights and scratch the version's instances hold, by engine "
                      "(engine=\"cuda\": GPU memory)."),
      .cellular_active = gauge("rnnserve_cellular_active_slots",
                               "Step-level batching: sequences in slots, all instances."),
      .cellular_chunk_steps = histogram("rnnserve_cellular_chunk_steps",
                                        "Step-level batching: steps one engine call advanced."),
      .cellular_utilization =
          histogram("rnnserve_cellular_slot_utilization",
                    "Step-level batching: sequences a chunk advanced / slots of the instance."),
      .first_step = histogram("rnnserve_time_to_first_step_seconds",
                              "Step-level batching: from queued to a sequence's first chunk "
                              "done, in seconds."),
  });
  unmatched_ = std::make_unique<ModelMetrics>(families_.get(), "", "", false);
}

ServerMetrics::~ServerMetrics() = default;

std::vector<std::shared_ptr<prometheus::Collectable>> ServerMetrics::collectables() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> all = {visible_, process_};
  absl::MutexLock lock(&mu_);
  all.insert(all.end(), extra_.begin(), extra_.end());
  return all;
}

void ServerMetrics::AddCollectable(std::shared_ptr<prometheus::Collectable> c) {
  absl::MutexLock lock(&mu_);
  extra_.push_back(std::move(c));
}

std::string ServerMetrics::ExpositionText() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables()) {
    std::vector<prometheus::MetricFamily> f = c->Collect();
    families.insert(families.end(), std::make_move_iterator(f.begin()),
                    std::make_move_iterator(f.end()));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

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
  families_->load_duration.Add(ModelLabels(info.name, version))
      .Set(absl::ToDoubleSeconds(info.load_duration));
  std::map<std::string, double> bytes;
  for (size_t i = 0; i < info.engines.size(); ++i) {
    bytes[info.engines[i]] +=
        i < info.memory_bytes.size() ? static_cast<double>(info.memory_bytes[i]) : 0.0;
  }
  for (const auto& [engine, b] : bytes) {
    families_->memory.Add({{"model", info.name}, {"version", version}, {"engine", engine}}).Set(b);
    m->AddEngine(engine);
  }
  for (absl::string_view method : {"Predict", "Evaluate", "ModelMetadata"}) {
    m->RequestDuration(method);
    m->RequestCounter(method, absl::StatusCode::kOk);
  }
  families_->model_loaded.Add(ModelLabels(info.name, version)).Set(1);
  visible_->Show(info.name, version);
  return *m;
}

void ServerMetrics::ModelLoadFailed(const std::string& name, int64_t version) {
  const std::string v = version > 0 ? std::to_string(version) : "";
  families_->model_loaded.Add(ModelLabels(name, v)).Set(0);
  visible_->Show(name, v);
}

void ServerMetrics::ModelUnloaded(const std::string& name, int64_t version) {
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      if (auto v = it->second.find(version); v != it->second.end()) v->second.loaded = false;
    }
  }
  visible_->Hide(name, version > 0 ? std::to_string(version) : "");
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
