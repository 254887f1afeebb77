// Servable's load: reading the model, its signature, instances, load-time probes, the
// batch-axis check, GPU warm-up, the dynamic batcher and the report to metrics. Serving is in
// servable.cc.

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "engine/lengths_rewrite.h"
#include "models/model_loader.h"
#include "server/batch_layout.h"
#include "server/batch_util.h"
#include "server/batching/batching_config.h"
#include "server/batching/direct_scheduler.h"
#include "server/batching/instance_threads.h"
#include "server/log.h"
#include "server/model_check.h"
#include "server/model_probe.h"
#include "server/servable.h"

namespace rnnserve::server {
namespace {

namespace fs = std::filesystem;

// Instances on each GPU of an instance_group that leaves count unset (CreateInstances).
constexpr int kDefaultGpuInstances = 2;

// config.pbtxt's enums become the engine's by number (CreateInstances): the numbers must agree.
static_assert(static_cast<int>(engine::MathMode::kFp32) == v1::ModelOptimization::MATH_FP32);
static_assert(static_cast<int>(engine::MathMode::kTf32) == v1::ModelOptimization::MATH_TF32);
static_assert(static_cast<int>(engine::MathMode::kFp16) == v1::ModelOptimization::MATH_FP16);
static_assert(static_cast<int>(engine::MathMode::kBf16) == v1::ModelOptimization::MATH_BF16);
static_assert(v1::ModelOptimization::MathMode_MAX == v1::ModelOptimization::MATH_BF16);
static_assert(static_cast<int>(engine::CpuWeights::kFp32) == v1::ModelOptimization::FP32);
static_assert(static_cast<int>(engine::CpuWeights::kBf16) == v1::ModelOptimization::BF16);
static_assert(static_cast<int>(engine::CpuWeights::kInt8) == v1::ModelOptimization::INT8);
static_assert(v1::ModelOptimization::CpuWeights_MAX == v1::ModelOptimization::INT8);

// Why no GPU is usable is the same for every model: logged once, the first time a KIND_AUTO
// group finds none; each instance's line then says only that it runs on the CPU.
void LogNoGpuOnce(const std::string& why) {
  static absl::once_flag once;
  absl::call_once(once, [&why] {
    LogInfo(absl::StrCat(why, "; instance groups of KIND_AUTO run on the CPU engine"));
  });
}

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
    // saved_model.pb is the directory's model, added below, not a file of its own.
    if (entry.is_regular_file() && entry.path().filename() != "saved_model.pb" &&
        models::IsModelFile(entry.path().string())) {
      found.push_back(entry.path().string());
    }
  }
  // A TF Serving layout: the version directory itself is the model (saved_model.pb + variables/).
  // Triton's layout for one: <version>/model.savedmodel/.
  if (fs::is_regular_file(version_dir / "saved_model.pb", ec)) {
    found.push_back(version_dir.string());
  }
  if (fs::is_regular_file(version_dir / "model.savedmodel" / "saved_model.pb", ec)) {
    found.push_back((version_dir / "model.savedmodel").string());
  }
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat(
        version_dir.string(),
        ": no model file (.h5, .hdf5, .keras, .onnx, or a SavedModel's saved_model.pb)"));
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

// How Load() parses the file of a model in `model_dir` described by `config`.
models::LoadOptions FileLoadOptions(const std::string& model_dir, const v1::ModelConfig& config) {
  models::LoadOptions load;
  load.format = config.platform();
  if (!config.architecture_file().empty()) {
    load.architecture_json_path = (fs::path(model_dir) / config.architecture_file()).string();
  }
  return load;
}

}  // namespace

absl::Status Servable::CheckFile(const std::string& model_dir, int64_t version,
                                 const v1::ModelConfig& config) {
  auto file = FindModelFile(fs::path(model_dir) / std::to_string(version), config);
  if (!file.ok()) return file.status();
  return CheckModelFile(*file, FileLoadOptions(model_dir, config));
}

absl::StatusOr<std::unique_ptr<Servable>> Servable::Load(const std::string& model_dir,
                                                         int64_t version,
                                                         const v1::ModelConfig& config,
                                                         const ServableOptions& options) {
  const absl::Time started = absl::Now();
  std::unique_ptr<Servable> s(new Servable(version, config, options));
  const fs::path version_dir = fs::path(model_dir) / std::to_string(version);
  auto file = FindModelFile(version_dir, config);
  if (!file.ok()) return file.status();
  s->source_file_ = *file;
  const models::LoadOptions load = FileLoadOptions(model_dir, config);
  // A file that hangs or crashes the parser fails here, in a child process, not in the server.
  if (auto st = CheckModelFile(*file, load); !st.ok()) return st;
  auto model = models::LoadModelFile(*file, load);
  if (!model.ok()) return model.status();
  s->model_ = std::move(*model);
  auto training = models::ReadTrainingConfig(*file);
  if (training.ok()) {
    s->training_ = std::move(*training);
  } else {
    LogWarning(absl::StrCat(*file, ": training config ignored: ", training.status().message()));
  }
  return Build(std::move(s), started);
}

absl::StatusOr<std::unique_ptr<Servable>> Servable::FromModel(engine::Model model, int64_t version,
                                                              const v1::ModelConfig& config,
                                                              const ServableOptions& options) {
  const absl::Time started = absl::Now();
  std::unique_ptr<Servable> s(new Servable(version, config, options));
  s->source_file_ = absl::StrCat(config.name(), " (in memory)");
  s->model_ = std::move(model);
  return Build(std::move(s), started);
}

absl::StatusOr<std::unique_ptr<Servable>> Servable::Build(std::unique_ptr<Servable> s,
                                                          absl::Time load_started) {
  // Lengths as clients send them: against the file's layout (the engines check them again on
  // the model they compile).
  engine::LengthsRewrite lengths = engine::RewriteForLengths(s->model_);
  s->lengths_ = {.honored = std::move(lengths.honored),
                 .sequence_inputs = std::move(lengths.sequence_inputs),
                 .time_major = lengths.time_major};
  if (auto st = s->BuildInputSignature(); !st.ok()) return st;
  // From here on the model runs batch first; clients keep the file's layout.
  for (const TensorSignature& in : s->inputs_) s->input_batch_axes_.push_back(in.batch_axis);
  for (const engine::ValueInfo& out : s->model_.outputs) {
    s->output_batch_axes_.push_back(out.batch_axis);
  }
  s->moves_batch_axes_ = HasMovedBatchAxes(s->model_);
  if (s->moves_batch_axes_) s->model_ = BatchFirstModel(std::move(s->model_));
  s->streamable_ = absl::OkStatus();
  for (const TensorSignature& in : s->inputs_) {
    if (in.batch_axis == 0 || !s->streamable_.ok()) continue;
    // A state input [layers * directions, batch, hidden] would override the state a stream
    // carries; chunks of a time-major input are not [1, T, ...].
    s->streamable_ = absl::FailedPreconditionError(absl::StrCat(
        "input '", in.name, "' holds the batch on axis ", in.batch_axis,
        " (an initial state or a time-major input): StreamPredict carries the recurrent state "
        "itself and takes batch-first [1, T, ...] chunks; use Predict"));
  }
  if (s->streamable_.ok()) s->streamable_ = CheckStreamable(s->model_);
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
  if (auto st = s->StartScheduler(); !st.ok()) return st;
  s->ReportLoaded(absl::Now() - load_started);
  return s;
}

absl::Status Servable::BuildInputSignature() {
  // Inputs: the file's, renamed and checked by config.pbtxt when it lists them.
  const auto& cfg_in = config_.input();
  if (!cfg_in.empty() && cfg_in.size() != static_cast<int>(model_.inputs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": config.pbtxt lists ", cfg_in.size(),
                                                   " inputs; the model has ",
                                                   model_.inputs.size()));
  }
  for (size_t i = 0; i < model_.inputs.size(); ++i) {
    const engine::ValueInfo& v = model_.inputs[i];
    TensorSignature sig{v.name, v.dtype, v.shape, v.batch_axis, false};
    if (sig.shape.empty()) sig.shape = {-1, -1, -1};
    if (sig.batch_axis >= static_cast<int>(sig.shape.size())) sig.batch_axis = 0;
    sig.shape[sig.batch_axis] = -1;
    if (!cfg_in.empty()) {
      const v1::ModelTensor& c = cfg_in[static_cast<int>(i)];
      sig.name = c.name();
      sig.reject_non_finite = c.reject_non_finite();
      if (c.data_type() != v1::TYPE_INVALID && FromConfigType(c.data_type()) != v.dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            name(), ": input '", c.name(), "' has data_type ", v1::DataType_Name(c.data_type()),
            "; the model takes ", DTypeName(v.dtype)));
      }
      if (c.dims_size() > 0) {
        // dims leave out the batch axis, wherever the file has it.
        engine::Shape dims(c.dims().begin(), c.dims().end());
        dims.insert(dims.begin() + std::min<size_t>(sig.batch_axis, dims.size()), -1);
        if (dims.size() != sig.shape.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              name(), ": input '", c.name(), "' dims ", engine::ShapeString(dims),
              " (batch first) differ in rank from the model's ", engine::ShapeString(sig.shape)));
        }
        for (size_t d = 0; d < dims.size(); ++d) {
          if (static_cast<int>(d) == sig.batch_axis) continue;
          if (sig.shape[d] >= 0 && dims[d] >= 0 && sig.shape[d] != dims[d]) {
            return absl::InvalidArgumentError(
                absl::StrCat(name(), ": input '", c.name(), "' dims ", engine::ShapeString(dims),
                             " differ from the model's ", engine::ShapeString(sig.shape)));
          }
          if (sig.shape[d] < 0) sig.shape[d] = dims[d];
        }
      }
    }
    inputs_.push_back(std::move(sig));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<engine::Engine>> Servable::MakeEngine(
    const engine::EngineOptions& o) const {
  engine::EngineOptions with_settings = o;
  with_settings.cpu_kernels = options_.cpu_kernels;
  if (options_.engine_factory) return options_.engine_factory(with_settings);
  return engine::Engine::Create(with_settings);
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
    // Unset count: one instance on the CPU (its threads take the cores), two on each GPU, so
    // that two batches are in flight on a GPU: one's copies, launches and synchronisation
    // overlap the other's kernels (on an H200, 1.2-1.3x the batched requests/s of one
    // instance and 2.7x the unbatched, bench/results/server-gpu-h200-2026-11-26.md).
    const int per_device = g.count() > 0 ? g.count() : (want_gpu[k] ? kDefaultGpuInstances : 1);
    group_instances[k] = per_device * (want_gpu[k] ? std::max(1, g.gpus_size()) : 1);
    total += group_instances[k];
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& g = groups[k];
    for (int i = 0; i < group_instances[k]; ++i) {
      InstanceInfo info;
      std::string log_reason;
      std::unique_ptr<engine::CompiledModel> compiled;
      std::string why_not_gpu_here = why_not_gpu[k];
      engine::CompileOptions options;
      options.math_mode = static_cast<engine::MathMode>(config_.optimization().math_mode());
      options.max_batch_size = config_.max_batch_size();
      options.whole_batch_graphs =
          options_.whole_batch_graphs &&
          config_.optimization().gpu_graphs() != v1::ModelOptimization::GPU_GRAPHS_OFF;
      int gpu_device = 0;
      if (want_gpu[k]) {
        // Instances i, i + count, ... of GPU j: the GPUs take turns.
        const int device = g.gpus_size() > 0 ? g.gpus(i % g.gpus_size()) : 0;
        gpu_device = device;
        auto eng = MakeEngine({.kind = engine::EngineKind::kCuda, .device = device});
        absl::StatusOr<std::unique_ptr<engine::CompiledModel>> c =
            eng.ok() ? (*eng)->Compile(model_, options)
                     : absl::StatusOr<std::unique_ptr<engine::CompiledModel>>(eng.status());
        if (c.ok()) {
          compiled = std::move(*c);
          info.kind = "KIND_GPU";
          info.reason =
              absl::StrCat("GPU ", device, " (cuDNN",
                           options.whole_batch_graphs ? "" : "; whole-batch graphs off", ")");
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
        options.cpu_weights = static_cast<engine::CpuWeights>(config_.optimization().cpu_weights());
        auto eng = MakeEngine({.kind = engine::EngineKind::kCpu});
        if (!eng.ok()) return eng.status();
        auto c = (*eng)->Compile(model_, options);
        if (!c.ok()) {
          return absl::Status(c.status().code(),
                              absl::StrCat(source_file_, ": ", c.status().message()));
        }
        compiled = std::move(*c);
        info.kind = "KIND_CPU";
        // Where no GPU is visible at all, the log says why once; the metadata, per instance.
        const bool no_device = g.kind() == v1::ModelInstanceGroup::KIND_AUTO && !want_gpu[k];
        if (no_device) LogNoGpuOnce(why_not_gpu_here);
        info.reason = g.kind() == v1::ModelInstanceGroup::KIND_CPU
                          ? "instance_group asks for KIND_CPU"
                          : absl::StrCat("KIND_AUTO without a usable GPU: ", why_not_gpu_here);
        log_reason = no_device ? "KIND_AUTO, no usable GPU" : info.reason;
        // Which of the CPU engine's kernel sets runs (engine/cpu/panel_gemm.h), and how it
        // stores and multiplies the recurrent weights (engine/cpu/quant_gemm.h).
        const std::string kernels = absl::StrCat("; ", engine::CpuKernelsNote(options.cpu_weights));
        absl::StrAppend(&info.reason, kernels);
        absl::StrAppend(&log_reason, kernels);
      } else {
        log_reason = info.reason;
      }
      if (instances_.empty()) {
        first_engine_ =
            info.kind == "KIND_GPU"
                ? engine::EngineOptions{.kind = engine::EngineKind::kCuda, .device = gpu_device}
                : engine::EngineOptions{.kind = engine::EngineKind::kCpu};
        first_compile_ = options;
      }
      info.engine = compiled->engine_name();
      info.layers = compiled->placements();
      info.memory_bytes = compiled->memory_bytes();
      LogInfo(absl::StrCat("model ", name(), " v", version_, " instance ", instances_.size(), ": ",
                           info.engine, " engine (", log_reason, ")"));
      instance_info_.push_back(std::move(info));
      instances_.push_back(std::move(compiled));
    }
  }
  return absl::OkStatus();
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
    if (!instances_[i]->times_kernels_per_shape()) continue;
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
  // Before the scheduler starts, nothing else runs the instances.
  const absl::Status s = instances_[0]->Run(batch, out);
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
    sig.shape = a[i].shape();  // batch first
    for (size_t d = 0; d < sig.shape.size(); ++d) {
      if (d >= b[i].shape().size() || b[i].dim(static_cast<int>(d)) != sig.shape[d]) {
        sig.shape[d] = -1;
      }
    }
    if (i < output_batch_axes_.size() &&
        output_batch_axes_[i] < static_cast<int>(sig.shape.size())) {
      sig.batch_axis = output_batch_axes_[i];
      sig.shape = MoveAxis(sig.shape, 0, sig.batch_axis);
    }
    outputs_.push_back(std::move(sig));
  }
  return absl::OkStatus();
}

absl::Status Servable::CheckBatchAxis() {
  if (config_.max_batch_size() == 0) return absl::OkStatus();
  const engine::Batch pair = DistinctRowsProbe(inputs_);
  std::vector<engine::Tensor> both, alone;
  if (auto st = RunProbe(pair, &both); !st.ok()) return st;
  if (auto st = RunProbe(SliceBatch(pair, 1, 2), &alone); !st.ok()) return st;
  std::vector<std::string> names;
  for (const TensorSignature& o : outputs_) names.push_back(o.name);
  const std::string why = BatchAxisProblem(both, alone, names);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", name(), "' v", version_, ": max_batch_size ", config_.max_batch_size(),
      " needs axis 0 of every input and output to be the batch axis, but ", why,
      "; set max_batch_size: 0 in config.pbtxt (and leave out dynamic_batching) to run each "
      "request alone"));
}

absl::Status Servable::StartScheduler() {
  run_on_caller_budget_ = options_.run_on_caller_budget.value_or(absl::Microseconds(250));
  v1::ModelConfig batching = config_;
  if (config_.has_cellular_batching()) {
    const absl::Status cellular = StartCellular();
    if (cellular.ok() || !absl::IsFailedPrecondition(cellular)) return cellular;
    // A model that cannot batch step by step batches whole requests, and says why.
    scheduler_reason_ = std::string(cellular.message());
    LogWarning(absl::StrCat("model ", name(), " v", version_, ": ", scheduler_reason_,
                            "; requests are batched whole (dynamic batching)"));
    batching.mutable_dynamic_batching();
  }
  if (batching::WantsDynamicBatching(batching)) return StartDynamic(batching);
  if (config_.has_dynamic_batching()) {
    LogWarning(absl::StrCat("model ", name(), " v", version_,
                            ": dynamic_batching needs max_batch_size > 0; requests run alone"));
  }
  return StartDirect();
}

absl::Status Servable::StartDirect() {
  auto direct = batching::DirectScheduler::Create(
      {.model_name = name(), .max_batch_size = max_batch_size()}, InstancePointers(),
      [this](int instance, const absl::Status& fault) { return ProbeAfterFault(instance, fault); });
  if (!direct.ok()) return direct.status();
  (*direct)->SetObserver([this](const batching::BatchStats& stats) {
    NoteComputeTime(stats.compute);
    recorder_.Observe(stats);
  });
  scheduler_ = *std::move(direct);
  return absl::OkStatus();
}

absl::Status Servable::StartDynamic(const v1::ModelConfig& batching) {
  // Axis 1 (batch first) is the time axis where the signature leaves it dynamic.
  auto time_axes = [](const std::vector<TensorSignature>& sigs) {
    std::vector<bool> axes;
    for (const TensorSignature& s : sigs) {
      const engine::Shape shape = MoveAxis(s.shape, s.batch_axis, 0);
      axes.push_back(shape.size() >= 2 && shape[1] < 0);
    }
    return axes;
  };
  auto options =
      batching::BatcherOptionsFromConfig(batching, time_axes(inputs_), time_axes(outputs_));
  if (!options.ok()) return options.status();
  const bool on_gpu = std::any_of(instance_info_.begin(), instance_info_.end(),
                                  [](const InstanceInfo& i) { return i.kind == "KIND_GPU"; });
  if (on_gpu && !config_.parameters().contains(batching::kMaxComputedStepsRatioParameter)) {
    options->max_computed_steps_ratio = batching::kGpuMaxComputedStepsRatio;
  }
  const bool has_sequences = std::any_of(lengths_.sequence_inputs.begin(),
                                         lengths_.sequence_inputs.end(), [](bool b) { return b; });
  if (has_sequences && !lengths_.honored.ok() && options->max_computed_steps_ratio != 1) {
    // Padding a shorter sequence to a longer one's steps needs lengths, which this model
    // cannot honour: only sequences of one length may share a batch. A bound that config.pbtxt
    // sets otherwise cannot be honoured, so the load says so; without one, 1 is the default.
    if (config_.parameters().contains(batching::kMaxComputedStepsRatioParameter)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", name(), "': parameter ", batching::kMaxComputedStepsRatioParameter, " is ",
          options->max_computed_steps_ratio, ", but the model cannot honour per-sequence lengths (",
          lengths_.honored.message(),
          "), so only sequences of one length can share a batch: set it to 1 or leave it out"));
    }
    LogInfo(absl::StrCat("model ", name(), " v", version_,
                         ": batches only sequences of one length (max_computed_steps_ratio 1): ",
                         lengths_.honored.message()));
    options->max_computed_steps_ratio = 1;
  }
  auto batcher = batching::DynamicBatcher::Create(*options, InstancePointers());
  if (!batcher.ok()) return batcher.status();
  batcher_ = batcher->get();
  batcher_->SetInstanceProbe(
      [this](int instance, const absl::Status& fault) { return ProbeAfterFault(instance, fault); });
  batcher_->SetObserver([this](const batching::BatchStats& stats) {
    NoteComputeTime(stats.compute);
    recorder_.Observe(stats);
  });
  scheduler_ = *std::move(batcher);
  LogInfo(absl::StrCat("model ", name(), " v", version_, ": ", batching::DescribeForming(*options),
                       "; ", instances_.size(), " instance worker(s)"));
  return absl::OkStatus();
}

std::vector<engine::CompiledModel*> Servable::InstancePointers() const {
  std::vector<engine::CompiledModel*> out;
  for (const auto& i : instances_) out.push_back(i.get());
  return out;
}

void Servable::ReportLoaded(absl::Duration load_duration) {
  if (options_.metrics == nullptr) return;
  metrics::ModelLoadInfo info{.name = name(), .version = version_, .load_duration = load_duration};
  for (const InstanceInfo& i : instance_info_) {
    info.engines.push_back(i.engine);
    info.memory_bytes.push_back(i.memory_bytes);
  }
  recorder_.Attach(&options_.metrics->ModelLoaded(info), info.engines);
}

}  // namespace rnnserve::server
