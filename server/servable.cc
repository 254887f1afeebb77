#include "server/servable.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "models/model_loader.h"
#include "server/batch_util.h"
#include "server/batching/batching_config.h"
#include "server/batching/instance_threads.h"
#include "server/log.h"
#include "server/metrics/batch_timesteps.h"
#include "server/metrics/server_metrics.h"
#include "server/model_check.h"

namespace rnnserve::server {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> FindModelFile(const fs::path& version_dir,
                                          const v1::ModelConfig& config) {
  if (!config.default_model_filename().empty()) {
    const fs::path p = version_dir / config.default_model_filename();
    if (!fs::exists(p)) return absl::NotFoundError(absl::StrCat(p.string(), ": no such file"));
    return p.string();
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(version_dir, ec)) {
    if (entry.is_regular_file() && models::IsModelFile(entry.path().string())) {
      found.push_back(entry.path().string());
    }
  }
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat(version_dir.string(), ": no model file (.h5, .hdf5, .keras or .onnx)"));
  }
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    return absl::InvalidArgumentError(
        absl::StrCat(version_dir.string(), ": several model files (", absl::StrJoin(found, ", "),
                     "); set default_model_filename in config.pbtxt"));
  }
  return found[0];
}

engine::DType FromConfigType(v1::DataType t) {
  return (t == v1::TYPE_INT32 || t == v1::TYPE_INT64) ? engine::DType::kInt64
                                                      : engine::DType::kFloat32;
}

// A probe batch of B sequences of T steps for every input, with harmless values.
engine::Batch ProbeBatch(const std::vector<TensorSignature>& inputs, int64_t B, int64_t T) {
  engine::Batch batch;
  for (const TensorSignature& in : inputs) {
    engine::Shape shape = in.shape;
    shape[0] = B;
    for (size_t i = 1; i < shape.size(); ++i) {
      if (shape[i] < 0) shape[i] = T;
    }
    if (in.dtype == engine::DType::kInt64) {
      batch.inputs.push_back(
          engine::Tensor::Int64(shape, std::vector<int64_t>(engine::NumElements(shape), 1)));
    } else {
      batch.inputs.push_back(
          engine::Tensor::Float(shape, std::vector<float>(engine::NumElements(shape), 0.125f)));
    }
  }
  return batch;
}

// Chunked execution equals whole-sequence execution only when every layer is causal: it sees
// no future step and carries history only in recurrent state.
absl::Status CheckStreamable(const engine::Model& model) {
  for (const engine::Layer& layer : model.layers) {
    const engine::LayerSpec& spec = layer.spec;
    std::string why;
    if (const auto* r = std::get_if<engine::RecurrentSpec>(&spec)) {
      if (r->directions.size() != 1 || r->directions[0].reverse) {
        why = "runs backwards over the sequence (bidirectional or reverse)";
      }
    } else if (const auto* sm = std::get_if<engine::SoftmaxSpec>(&spec)) {
      if (sm->axis != -1) why = "normalises over an axis other than the features";
    } else if (!(std::holds_alternative<engine::DenseSpec>(spec) ||
                 std::holds_alternative<engine::MaskingSpec>(spec) ||
                 std::holds_alternative<engine::EmbeddingSpec>(spec) ||
                 std::holds_alternative<engine::ActivationSpec>(spec) ||
                 std::holds_alternative<engine::IdentitySpec>(spec) ||
                 std::holds_alternative<engine::BatchNormSpec>(spec) ||
                 std::holds_alternative<engine::LayerNormSpec>(spec))) {
      why = "needs the whole sequence at once";
    }
    if (!why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("layer '", layer.name, "' (", layer.source_class, ") ", why,
                       ": StreamPredict needs a model whose layers are all causal; use Predict"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Servable>> Servable::Load(const std::string& model_dir,
                                                         int64_t version,
                                                         const v1::ModelConfig& config) {
  std::unique_ptr<Servable> s(new Servable(version, config));
  const fs::path version_dir = fs::path(model_dir) / std::to_string(version);
  auto file = FindModelFile(version_dir, config);
  if (!file.ok()) return file.status();
  s->source_file_ = *file;
  models::LoadOptions options;
  options.format = config.platform();
  if (!config.architecture_file().empty()) {
    options.architecture_json_path = (fs::path(model_dir) / config.architecture_file()).string();
  }
  // A file that hangs or crashes the parser fails here, in a child process, not in the server.
  if (auto st = CheckModelFile(*file, options); !st.ok()) return st;
  auto model = models::LoadModelFile(*file, options);
  if (!model.ok()) return model.status();
  s->model_ = std::move(*model);
  s->streamable_ = CheckStreamable(s->model_);
  auto training = models::ReadTrainingConfig(*file);
  if (training.ok()) {
    s->training_ = std::move(*training);
  } else {
    LogWarning(absl::StrCat(*file, ": training config ignored: ", training.status().message()));
  }

  // Inputs: the file's, renamed and checked by config.pbtxt when it lists them.
  const auto& cfg_in = config.input();
  if (!cfg_in.empty() && cfg_in.size() != static_cast<int>(s->model_.inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(config.name(), ": config.pbtxt lists ",
                                                   cfg_in.size(), " inputs; the model has ",
                                                   s->model_.inputs.size()));
  }
  for (size_t i = 0; i < s->model_.inputs.size(); ++i) {
    const engine::ValueInfo& v = s->model_.inputs[i];
    TensorSignature sig{v.name, v.dtype, v.shape, false};
    if (sig.shape.empty()) sig.shape = {-1, -1, -1};
    sig.shape[0] = -1;
    if (!cfg_in.empty()) {
      const v1::ModelTensor& c = cfg_in[static_cast<int>(i)];
      sig.name = c.name();
      sig.reject_non_finite = c.reject_non_finite();
      if (c.data_type() != v1::TYPE_INVALID && FromConfigType(c.data_type()) != v.dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            config.name(), ": input '", c.name(), "' has data_type ",
            v1::DataType_Name(c.data_type()), "; the model takes ", DTypeName(v.dtype)));
      }
      if (c.dims_size() > 0) {
        engine::Shape dims = {-1};
        dims.insert(dims.end(), c.dims().begin(), c.dims().end());
        if (dims.size() != sig.shape.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              config.name(), ": input '", c.name(), "' dims ", engine::ShapeString(dims),
              " (batch first) differ in rank from the model's ", engine::ShapeString(sig.shape)));
        }
        for (size_t d = 1; d < dims.size(); ++d) {
          if (sig.shape[d] >= 0 && dims[d] >= 0 && sig.shape[d] != dims[d]) {
            return absl::InvalidArgumentError(absl::StrCat(
                config.name(), ": input '", c.name(), "' dims ", engine::ShapeString(dims),
                " differ from the model's ", engine::ShapeString(sig.shape)));
          }
          if (sig.shape[d] < 0) sig.shape[d] = dims[d];
        }
      }
    }
    s->inputs_.push_back(std::move(sig));
  }
  s->masking_ = "keras";
  for (const engine::Layer& l : s->model_.layers) {
    if (const auto* r = std::get_if<engine::RecurrentSpec>(&l.spec)) {
      s->masking_ = engine::MaskSemanticsName(r->masking);
    }
  }
  if (auto st = s->CreateInstances(); !st.ok()) return st;
  if (auto st = s->ProbeSignature(); !st.ok()) return st;
  if (auto st = s->CheckBatchAxis(); !st.ok()) return st;
  if (auto st = s->WarmUpGpuInstances(); !st.ok()) return st;
  if (auto st = s->StartBatcher(); !st.ok()) return st;
  return s;
}

bool Servable::HasRecurrentLayer(const std::string& name) const {
  for (const engine::Layer& l : model_.layers) {
    if (l.name == name && std::holds_alternative<engine::RecurrentSpec>(l.spec)) return true;
  }
  return false;
}

absl::Status Servable::CreateInstances() {
  std::vector<v1::ModelInstanceGroup> groups(config_.instance_group().begin(),
                                             config_.instance_group().end());
  if (groups.empty()) groups.emplace_back();  // one AUTO instance
  // A group that runs on GPUs has `count` instances on each GPU it names (GPU 0 when it names
  // none), as Triton's instance_group; on the CPU, `count` instances.
  std::vector<std::string> why_not_gpu(groups.size());
  std::vector<bool> want_gpu(groups.size());
  std::vector<int> group_instances(groups.size());
  int total = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& g = groups[k];
    want_gpu[k] =
        g.kind() == v1::ModelInstanceGroup::KIND_GPU ||
        (g.kind() == v1::ModelInstanceGroup::KIND_AUTO && engine::CudaAvailable(&why_not_gpu[k]));
    group_instances[k] = std::max(1, g.count()) * (want_gpu[k] ? std::max(1, g.gpus_size()) : 1);
    total += group_instances[k];
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& g = groups[k];
    for (int i = 0; i < group_instances[k]; ++i) {
      InstanceInfo info;
      std::unique_ptr<engine::CompiledModel> compiled;
      std::string why_not_gpu_here = why_not_gpu[k];
      engine::CompileOptions options;
      options.math_mode = static_cast<engine::MathMode>(config_.optimization().math_mode());
      options.max_batch_size = config_.max_batch_size();
      if (want_gpu[k]) {
        // Instances i, i + count, ... of GPU j: the GPUs take turns.
        const int device = g.gpus_size() > 0 ? g.gpus(i % g.gpus_size()) : 0;
        auto eng = engine::Engine::Create({.kind = engine::EngineKind::kCuda, .device = device});
        absl::StatusOr<std::unique_ptr<engine::CompiledModel>> c =
            eng.ok() ? (*eng)->Compile(model_, options)
                     : absl::StatusOr<std::unique_ptr<engine::CompiledModel>>(eng.status());
        if (c.ok()) {
          compiled = std::move(*c);
          info.kind = "KIND_GPU";
          info.reason = absl::StrCat("GPU ", device, " (cuDNN)");
        } else if (g.kind() == v1::ModelInstanceGroup::KIND_GPU) {
          return absl::FailedPreconditionError(
              absl::StrCat(name(), ": instance_group asks for KIND_GPU: ", c.status().message()));
        } else {
          why_not_gpu_here = std::string(c.status().message());
        }
      }
      if (!compiled) {
        // CPU instances share the cores: engine threads per instance <= cores / instances.
        options.num_threads =
            batching::CpuThreadsPerInstance(cores, total, config_.optimization().cpu_threads());
        options.math_mode = engine::MathMode::kFp32;
        auto eng = engine::Engine::Create({.kind = engine::EngineKind::kCpu});
        if (!eng.ok()) return eng.status();
        auto c = (*eng)->Compile(model_, options);
        if (!c.ok()) {
          return absl::Status(c.status().code(),
                              absl::StrCat(source_file_, ": ", c.status().message()));
        }
        compiled = std::move(*c);
        info.kind = "KIND_CPU";
        info.reason = g.kind() == v1::ModelInstanceGroup::KIND_CPU
                          ? "instance_group asks for KIND_CPU"
                          : absl::StrCat("KIND_AUTO without a usable GPU: ", why_not_gpu_here);
      }
      info.engine = compiled->engine_name();
      info.layers = compiled->placements();
      info.memory_bytes = compiled->memory_bytes();
      LogInfo(absl::StrCat("model ", name(), " v", version_, " instance ", instances_.size(), ": ",
                           info.engine, " engine (", info.reason, ")"));
      instance_info_.push_back(std::move(info));
      instances_.push_back(std::move(compiled));
    }
  }
  pool_ = std::make_unique<batching::InstancePool>(
      name(), static_cast<int>(instances_.size()),
      [this](int instance, const absl::Status& fault) { return ProbeAfterFault(instance, fault); });
  return absl::OkStatus();
}

absl::Status Servable::ProbeAfterFault(int instance, const absl::Status& fault) const {
  std::vector<engine::Tensor> out;
  const absl::Status probe = instances_[instance]->Run(ProbeBatch(inputs_, 1, 2), &out);
  const std::string what = absl::StrCat("model ", name(), " v", version_, " instance ", instance,
                                        ": engine fault (", fault.message(), "); ");
  if (probe.ok()) {
    LogWarning(absl::StrCat(what, "a test batch still runs, so it stays in rotation"));
  } else {
    LogError(absl::StrCat(what, "a test batch fails too (", probe.message(),
                          "), so it leaves rotation"));
  }
  return probe;
}

absl::Status Servable::WarmUpGpuInstances() {
  std::set<int64_t> sizes = {1};
  if (const int max = config_.max_batch_size(); max > 0) {
    sizes.insert(max);
    for (int p : config_.dynamic_batching().preferred_batch_size()) {
      if (p > 0 && p <= max) sizes.insert(p);
    }
  }
  // The steps of the first input's time axis where the model fixes it, else kWarmUpSteps.
  int64_t steps = kWarmUpSteps;
  if (!inputs_.empty() && inputs_[0].shape.size() >= 2 && inputs_[0].shape[1] > 0) {
    steps = inputs_[0].shape[1];
  }
  for (size_t i = 0; i < instances_.size(); ++i) {
    if (instances_[i]->engine_name() != "cuda") continue;
    for (int64_t B : sizes) {
      std::vector<engine::Tensor> out;
      if (auto st = instances_[i]->Run(ProbeBatch(inputs_, B, steps), &out); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat(source_file_, ": warm-up batch of ", B, "x",
                                                    steps, " failed: ", st.message()));
      }
    }
    instance_info_[i].layers = instances_[i]->placements();
    instance_info_[i].memory_bytes = instances_[i]->memory_bytes();
    LogInfo(absl::StrCat("model ", name(), " v", version_, " instance ", i,
                         ": algorithms timed for batch sizes ", absl::StrJoin(sizes, ", "), " at ",
                         steps, " steps"));
  }
  return absl::OkStatus();
}

absl::Status Servable::RunProbe(const engine::Batch& batch, std::vector<engine::Tensor>* out) {
  const absl::Status s = RunOnInstance(batch, out);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(source_file_, ": test run failed: ", s.message()));
}

absl::Status Servable::ProbeSignature() {
  // Two probes that differ in batch and time size tell which output axes are dynamic.
  std::vector<engine::Tensor> a, b;
  if (auto s = RunProbe(ProbeBatch(inputs_, 1, 2), &a); !s.ok()) return s;
  if (auto s = RunProbe(ProbeBatch(inputs_, 2, 3), &b); !s.ok()) return s;
  const auto& cfg_out = config_.output();
  if (!cfg_out.empty() && cfg_out.size() != static_cast<int>(a.size())) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": config.pbtxt lists ", cfg_out.size(),
                                                   " outputs; the model has ", a.size()));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    TensorSignature sig;
    sig.name = cfg_out.empty() ? model_.outputs[i].name : cfg_out[static_cast<int>(i)].name();
    sig.dtype = a[i].dtype();
    sig.shape = a[i].shape();
    for (size_t d = 0; d < sig.shape.size(); ++d) {
      if (d >= b[i].shape().size() || b[i].dim(static_cast<int>(d)) != sig.shape[d]) {
        sig.shape[d] = -1;
      }
    }
    outputs_.push_back(std::move(sig));
  }
  return absl::OkStatus();
}

absl::Status Servable::CheckBatchAxis() {
  if (config_.max_batch_size() == 0) return absl::OkStatus();
  // Row 1 of a two-row probe must equal the same row run alone. On a time-major model row 1
  // is the second time step, which depends on the first through the recurrent state.
  engine::Batch pair = ProbeBatch(inputs_, 2, 3);
  for (engine::Tensor& t : pair.inputs) {
    if (t.dtype() != engine::DType::kFloat32) continue;
    const int64_t row = t.num_elements() / 2;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      t.f32()[i] = 0.25f * static_cast<float>(i % 7) - 0.5f + (i < row ? 0.375f : -0.25f);
    }
  }
  std::vector<engine::Tensor> both, alone;
  if (auto st = RunProbe(pair, &both); !st.ok()) return st;
  if (auto st = RunProbe(SliceBatch(pair, 1, 2), &alone); !st.ok()) return st;
  std::string why;
  for (size_t o = 0; o < both.size() && o < alone.size() && why.empty(); ++o) {
    const engine::Tensor &b = both[o], &a = alone[o];
    const std::string out_name = o < outputs_.size() ? outputs_[o].name : std::to_string(o);
    if (b.rank() == 0 || a.rank() == 0 || b.dim(0) != 2 || a.dim(0) != 1 ||
        b.num_elements() != 2 * a.num_elements() || b.dtype() != a.dtype()) {
      why = absl::StrCat("output '", out_name, "' has shape ", engine::ShapeString(b.shape()),
                         " for 2 input rows: axis 0 is not the batch axis");
      break;
    }
    const int64_t n = a.num_elements();
    for (int64_t i = 0; i < n && a.dtype() == engine::DType::kFloat32; ++i) {
      const float x = b.f32()[n + i], y = a.f32()[i];
      if (!(std::fabs(x - y) <= 1e-4f * std::max(1.0f, std::fabs(y)))) {
        why = absl::StrCat("row 1 of output '", out_name,
                           "' depends on input row 0: axis 0 is not the batch axis (a "
                           "time-major model?)");
        break;
      }
    }
  }
  if (why.empty()) return absl::OkStatus();
  LogWarning(absl::StrCat("model ", name(), " v", version_, ": max_batch_size ",
                          config_.max_batch_size(), " ignored, requests run alone: ", why));
  config_.set_max_batch_size(0);
  // Recompile: an engine may size its buffers and graphs by max_batch_size.
  pool_.reset();
  instances_.clear();
  instance_info_.clear();
  return CreateInstances();
}

absl::Status Servable::StartBatcher() {
  if (!batching::WantsDynamicBatching(config_)) {
    if (config_.has_dynamic_batching()) {
      LogWarning(absl::StrCat("model ", name(), " v", version_,
                              ": dynamic_batching needs max_batch_size > 0; requests run alone"));
    }
    return absl::OkStatus();
  }
  // Axis 1 is the time axis where the signature leaves it dynamic.
  auto time_axes = [](const std::vector<TensorSignature>& sigs) {
    std::vector<bool> axes;
    for (const TensorSignature& s : sigs) axes.push_back(s.shape.size() >= 2 && s.shape[1] < 0);
    return axes;
  };
  auto options =
      batching::BatcherOptionsFromConfig(config_, time_axes(inputs_), time_axes(outputs_));
  if (!options.ok()) return options.status();
  std::vector<engine::CompiledModel*> instances;
  for (const auto& i : instances_) instances.push_back(i.get());
  auto batcher = batching::DynamicBatcher::Create(*options, std::move(instances));
  if (!batcher.ok()) return batcher.status();
  batcher_ = std::move(*batcher);
  batcher_->SetInstanceProbe(
      [this](int instance, const absl::Status& fault) { return ProbeAfterFault(instance, fault); });
  // Metrics: each engine call, and each request's wait in the queue once its rows start.
  batcher_->SetObserver([this](const batching::BatchStats& stats) {
    metrics::ModelMetrics* const m = metrics::ServerMetrics::Global().Find(name(), version_);
    if (m == nullptr) return;
    for (absl::Duration waited : stats.queue_durations) m->QueueLeft(waited);
    if (!stats.status.ok()) return;
    m->RecordBatch({.engine = instance_info_[stats.instance].engine,
                    .batch_size = stats.sequences,
                    .real_timesteps = stats.real_steps,
                    .computed_timesteps = stats.computed_steps,
                    .compute = stats.compute});
  });
  LogInfo(absl::StrCat("model ", name(), " v", version_, ": dynamic batching up to ",
                       options->max_batch_size, " sequences, ", options->max_queue_delay_us,
                       " us queue delay, ", instances_.size(), " instance worker(s)"));
  return absl::OkStatus();
}

absl::Status Servable::RunOnInstance(const engine::Batch& batch, std::vector<engine::Tensor>* out,
                                     absl::Time deadline) const {
  // metrics: nullptr until the repository reports the version loaded (the load probes).
  metrics::ModelMetrics* const m = metrics::ServerMetrics::Global().Find(name(), version_);
  const absl::Time queued = absl::Now();
  if (m != nullptr) m->QueueEntered();
  const absl::StatusOr<int> acquired = pool_->Acquire(deadline);
  if (!acquired.ok()) {
    if (m != nullptr) m->QueueLeft(absl::Now() - queued);
    return acquired.status();
  }
  const int index = *acquired;
  const absl::Time started = absl::Now();
  if (m != nullptr) m->QueueLeft(started - queued);
  const absl::Status s = instances_[index]->Run(batch, out);
  if (m != nullptr && s.ok()) {
    const metrics::Timesteps steps = metrics::CountTimesteps(batch);
    m->RecordBatch({.engine = instance_info_[index].engine,
                    .batch_size = steps.batch_size,
                    .real_timesteps = steps.real,
                    .computed_timesteps = steps.computed,
                    .compute = absl::Now() - started});
  }
  pool_->Release(index, s);
  return s;
}

absl::Status Servable::RunOn(int instance, const engine::Batch& batch,
                             std::vector<engine::Tensor>* outputs) const {
  if (instance < 0 || instance >= static_cast<int>(instances_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name(), "' has ", instances_.size(),
                                                   " instances; asked for ", instance));
  }
  if (batcher_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name(), "' batches dynamically: its batcher's workers own the instances"));
  }
  if (absl::Status s = pool_->AcquireInstance(instance); !s.ok()) return s;
  const absl::Status s = instances_[instance]->Run(batch, outputs);
  pool_->Release(instance, s);
  return s;
}

absl::Status Servable::RunBatched(const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                                  const RunOptions& options) const {
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  std::promise<Result> promise;
  std::future<Result> answer = promise.get_future();
  auto request = std::make_unique<batching::BatchRequest>();
  request->batch = batch;
  request->deadline = options.deadline;
  request->priority = options.priority;
  request->done = [&promise](Result result) { promise.set_value(std::move(result)); };
  // The batcher's observer reports the queue wait of requests whose rows start; a request that
  // leaves the queue without starting (deadline, unloading) is reported here.
  metrics::ModelMetrics* const m = metrics::ServerMetrics::Global().Find(name(), version_);
  const absl::Time queued = absl::Now();
  if (m != nullptr) m->QueueEntered();
  if (absl::Status s = batcher_->Schedule(&request); !s.ok()) {
    if (m != nullptr) m->QueueLeft(absl::Now() - queued);
    return s;
  }
  Result result = answer.get();
  if (m != nullptr &&
      (absl::IsDeadlineExceeded(result.status()) || absl::IsUnavailable(result.status()))) {
    m->QueueLeft(absl::Now() - queued);
  }
  if (!result.ok()) return result.status();
  *outputs = std::move(*result);
  return absl::OkStatus();
}

absl::Status Servable::Run(const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                           const RunOptions& options) const {
  if (batcher_ != nullptr) return RunBatched(batch, outputs, options);
  if (absl::Now() > options.deadline) {
    return absl::DeadlineExceededError("deadline passed before the request ran");
  }
  const int64_t B = batch.inputs.empty() ? 0 : batch.inputs[0].dim(0);
  const int64_t limit = max_batch_size() > 0 ? max_batch_size() : B;
  if (B <= limit) return RunOnInstance(batch, outputs, options.deadline);
  std::vector<std::vector<engine::Tensor>> parts;
  std::vector<std::map<std::string, std::vector<engine::Tensor>>> part_states;
  for (int64_t begin = 0; begin < B; begin += limit) {
    std::vector<engine::Tensor> out;
    engine::Batch part = SliceBatch(batch, begin, std::min(B, begin + limit));
    part_states.emplace_back();
    if (batch.final_states) part.final_states = &part_states.back();
    if (auto s = RunOnInstance(part, &out, options.deadline); !s.ok()) return s;
    parts.push_back(std::move(out));
  }
  outputs->clear();
  for (size_t o = 0; o < parts[0].size(); ++o) {
    std::vector<engine::Tensor> pieces;
    for (auto& p : parts) pieces.push_back(std::move(p[o]));
    outputs->push_back(ConcatRows(pieces));
  }
  if (batch.final_states) {
    batch.final_states->clear();
    for (const auto& [layer, states] : part_states[0]) {
      for (size_t i = 0; i < states.size(); ++i) {
        std::vector<engine::Tensor> pieces;
        for (auto& p : part_states) pieces.push_back(std::move(p[layer][i]));
        (*batch.final_states)[layer].push_back(ConcatRows(pieces));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
