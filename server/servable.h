#pragma once

// One loaded version of a model: its signature, its compiled instances, and a pool that
// hands each instance to one caller at a time.
//
// Load() (servable_load.cc) does all the work that can fail: reading the file, compiling one
// instance per configured instance, probing the model with tiny batches to learn its output
// shapes, checking that axis 0 is the batch axis when max_batch_size > 0, warming GPU
// instances up, and starting the dynamic batcher when config.pbtxt asks for one. After Load()
// succeeds, Run() (servable.cc) only fails on what a batch carries, on its deadline, on a full
// queue, or on an engine fault.
//
// Metrics: both run paths (the batcher's workers, and the caller's thread without a batcher)
// report to one ServingRecorder (serving_recorder.h), which writes to the ServerMetrics given
// in ServableOptions. The load's own probes and warm-up are not recorded.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/ir.h"
#include "models/training_config.h"
#include "rnnserve/v1/model_config.pb.h"
#include "server/batching/async_runner.h"
#include "server/batching/cellular_scheduler.h"
#include "server/batching/dynamic_batcher.h"
#include "server/batching/scheduler.h"
#include "server/core/request.h"
#include "server/metrics/server_metrics.h"
#include "server/serving_recorder.h"

namespace rnnserve::server {

struct InstanceInfo {
  std::string engine;  // "cpu" or "cuda"
  std::string kind;    // "KIND_CPU", "KIND_GPU"
  std::string reason;  // why this engine was chosen
  std::vector<engine::LayerPlacement> layers;
  int64_t memory_bytes = 0;
};

// How a servable is built and where it reports.
struct ServableOptions {
  using EngineFactory =
      std::function<absl::StatusOr<std::unique_ptr<engine::Engine>>(const engine::EngineOptions&)>;
  // Makes the engine of each instance (kind kCpu or kCuda, as the instance_group asks). Empty:
  // engine::Engine::Create. Server tests pass a deterministic fake engine here.
  EngineFactory engine_factory;
  // Where the servable's metrics go: at the end of a successful load it reports itself loaded
  // (ServerMetrics::ModelLoaded: engines, memory, load time) and from then on records every
  // request's queue wait and every engine call there. Null: nothing is recorded. Must outlive
  // the servable.
  metrics::ServerMetrics* metrics = nullptr;
  // Where a RunAsync answer that another thread than its caller's produced (a scheduler's
  // worker, or a caller that ran a batch holding it) is delivered: its `done` runs there, so
  // that the thread that ran a batch hands its requests over instead of building and sending
  // every response itself before it goes on. Null: on that thread. Must outlive the servable.
  batching::AsyncRunner* completions = nullptr;
  // RunAsync runs a batch on its caller's thread (a gRPC callback thread) when an instance is
  // idle and the model's recent engine calls took at most this long (an exponential average
  // of the last few); zero: never, a worker or runner thread always runs it. Unset: 250 µs.
  // At concurrency 1 on an H100 host the tiny batched GPU model served 0.90-0.94x the
  // requests/s of the unbatched one this way, 0.77-0.80x from the worker, in alternating rounds
  // on one server (bench/results/server-gpu-h100-2026-11-26b.md); on the 2-core CPU machine the
  // caller's thread is 1.2x faster at concurrency 1.
  std::optional<absl::Duration> run_on_caller_budget;
  // Engine settings of the process, read once from the environment in main.cc (README.md,
  // "Environment"): every instance's EngineOptions::cpu_kernels (RNNSERVE_CPU_KERNELS; "" the
  // widest set this CPU has), and false turns CompileOptions::whole_batch_graphs off for every
  // model whatever its config.pbtxt says (RNNSERVE_GPU_MODEL_GRAPHS=0).
  std::string cpu_kernels;
  bool whole_batch_graphs = true;
};

class Servable;

// The shared form of a loaded servable (the repository's and its requests'). A request that
// RunAsync answers holds its servable until the answer is built, on the scheduler's thread; if
// the version was unloaded meanwhile, that is the last reference, and the servable is then
// destroyed on a new thread (its destruction joins the threads of its scheduler).
std::shared_ptr<const Servable> ShareServable(std::unique_ptr<Servable> servable);

class Servable : public std::enable_shared_from_this<Servable> {
 public:
  // Loads <model_dir>/<version>/<file> as config.pbtxt describes it. Fails, naming the model
  // and what to change, when the file does not load or does not match the config, when an
  // instance cannot be compiled, or when max_batch_size > 0 for a model whose axis 0 is not
  // the batch axis (see CheckBatchAxis).
  static absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& model_dir,
                                                        int64_t version,
                                                        const v1::ModelConfig& config,
                                                        const ServableOptions& options = {});
  // The model file check (server/model_check.h) Load() starts with, alone: finds the version's
  // file and parses it in a child process. The repository runs it before Load() and outside the
  // lock that serialises builds, so a file that hangs the check holds back only its own model;
  // Load() then finds the file checked (a passed check is remembered until the file changes).
  static absl::Status CheckFile(const std::string& model_dir, int64_t version,
                                const v1::ModelConfig& config);
  // Load() for a model already in IR (no file: source_file() is "<name> (in memory)", no
  // training config). The same checks, probes and batcher as Load().
  static absl::StatusOr<std::unique_ptr<Servable>> FromModel(engine::Model model, int64_t version,
                                                             const v1::ModelConfig& config,
                                                             const ServableOptions& options = {});

  const std::string& name() const { return config_.name(); }
  int64_t version() const { return version_; }
  const v1::ModelConfig& config() const { return config_; }
  const std::string& source_file() const { return source_file_; }
  const std::string& platform() const { return model_.source_format; }
  // The model in IR, as the engines compile it (batch first: batch_layout.h).
  const engine::Model& ir() const { return model_; }
  const std::string& masking() const { return masking_; }
  const std::vector<TensorSignature>& inputs() const { return inputs_; }
  const std::vector<TensorSignature>& outputs() const { return outputs_; }
  const std::vector<InstanceInfo>& instances() const { return instance_info_; }
  // OK when StreamPredict can run the model chunk by chunk (only causal layers); otherwise the
  // reason, naming the layer.
  const absl::Status& streamable() const { return streamable_; }
  // Whether the model honours per-sequence lengths (engine/lengths_rewrite.h): OK, or the
  // INVALID_ARGUMENT naming the layer that cannot, for a request with lengths; which inputs the
  // lengths describe, and whether those are time-major [T, B, ...].
  using LengthsSupport = core::LengthsSupport;
  const LengthsSupport& lengths() const { return lengths_; }
  bool HasRecurrentLayer(const std::string& name) const;
  // What requests are validated against (server/core/request.h).
  core::Signature signature() const {
    return {inputs_, outputs_, [this](const std::string& l) { return HasRecurrentLayer(l); },
            &lengths_};
  }
  // How the model was compiled, when the file says (Keras training_config).
  const std::optional<models::TrainingConfig>& training_config() const { return training_; }
  // Largest batch one engine call takes; 0: unlimited.
  int max_batch_size() const { return config_.max_batch_size(); }

  // Runs a validated batch and blocks until its outputs are in *outputs: RunAsync and a wait
  // for its answer. The batch may run on the calling thread (the scheduler allows it there).
  // The batch is taken by value: callers that are done with it move it in (no copy). Inputs
  // and outputs are in the layout of inputs() and outputs(), each with its batch on its
  // batch_axis (the schedulers and the engine get them batch first: batch_layout.h).
  absl::Status Run(engine::Batch batch, std::vector<engine::Tensor>* outputs,
                   const RunOptions& options = {}) const;

  // Where RunAsync delivers a batch's outputs, or why there are none.
  using RunDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<engine::Tensor>>)>;
  // Run for a caller that should not block for long (a gRPC callback handler): `done` is
  // called exactly once with the outputs or the error. While the model's recent engine calls
  // are short (ServableOptions::run_on_caller_budget) and an instance is idle, the batch runs on
  // the calling thread (no hand-off to another thread and back); otherwise it is queued on the
  // model's scheduler and `done` runs on the thread that ran it (a scheduler thread, or, for
  // the batching schedulers, ServableOptions::completions when set), or on the calling thread
  // when the batch could not be queued. `done` must not block.
  // A caller that holds the servable (as shared by ShareServable) in `done` keeps an unloaded
  // version answering until its requests are done.
  void RunAsync(engine::Batch batch, const RunOptions& options, RunDone done) const;

  // Runs a batch on instance `instance` (an index into instances()) and nothing else, waiting
  // while another caller holds it: checks of one instance, e.g. each GPU of a multi-GPU
  // model. FAILED_PRECONDITION with a batching scheduler, whose workers own the instances.
  absl::Status RunOn(int instance, const engine::Batch& batch,
                     std::vector<engine::Tensor>* outputs) const;

  // Evaluate's cross-entropy losses take output `output` from the logits of the softmax or
  // sigmoid that produced it, as Keras does (server/evaluate/keras_logits.h), when it has them.
  bool HasOutputLogits(int output) const;
  // Runs `batch` as Run does (split into engine calls of at most max_batch_size sequences), on a
  // copy of the model that returns, after its outputs, output `output`'s logits. The copy is
  // compiled on first use, as instance 0 was (same engine, device and options), and kept;
  // callers take turns on it. It runs outside the schedulers and the serving metrics; its
  // engine calls stop between steps once the options' cancel or deadline says the caller gave
  // up (CANCELLED, DEADLINE_EXCEEDED). FAILED_PRECONDITION when HasOutputLogits(output) is
  // false.
  absl::Status RunWithLogits(int output, engine::Batch batch, std::vector<engine::Tensor>* outputs,
                             const RunOptions& options = {}) const;

  // The model's one scheduler (server/batching/scheduler.h), chosen at load.
  batching::SchedulerKind scheduler_kind() const { return scheduler_->kind(); }
  // The same scheduler as a dynamic batcher (counters and an observer for metrics); null
  // unless the model batches dynamically.
  batching::DynamicBatcher* batcher() const { return batcher_; }
  // The same scheduler as a step-level scheduler; null unless config.pbtxt asks for
  // cellular_batching and the model can run that way.
  batching::CellularScheduler* cellular() const { return cellular_; }
  // "cellular", "dynamic" or "none"; and, when cellular_batching was asked for and the model
  // cannot run that way, why (it then batches requests dynamically).
  std::string scheduler() const {
    return std::string(batching::SchedulerKindName(scheduler_kind()));
  }
  const std::string& scheduler_reason() const { return scheduler_reason_; }
  // Whether the calling thread is one of the servable's scheduler or runner threads.
  bool IsServingThread() const;

 private:
  Servable(int64_t version, v1::ModelConfig config, ServableOptions options)
      : version_(version), config_(std::move(config)), options_(std::move(options)) {}
  // Everything after the model is in IR: signature, instances, probes, batcher, metrics.
  static absl::StatusOr<std::unique_ptr<Servable>> Build(std::unique_ptr<Servable> s,
                                                         absl::Time load_started);
  absl::Status BuildInputSignature();
  absl::Status CreateInstances();
  absl::StatusOr<std::unique_ptr<engine::Engine>> MakeEngine(const engine::EngineOptions& o) const;
  // A load-time test run; its error names the model file.
  absl::Status RunProbe(const engine::Batch& batch, std::vector<engine::Tensor>* out);
  absl::Status ProbeSignature();
  // With max_batch_size > 0: whether axis 0 of every input and output holds independent
  // sequences, which batching (requests joined along axis 0, outputs cut back apart) and
  // splitting need. A time-major model (PyTorch's default batch_first=False export) has time
  // on axis 0, and a state output like h_n [layers, batch, H] has no batch axis first: for
  // such a model the load fails with FAILED_PRECONDITION naming the model, the output and the
  // fix (max_batch_size: 0, which runs each request alone). A setting is never overridden.
  absl::Status CheckBatchAxis();
  // GPU instances time their recurrent algorithms on the first batch of each size (and step
  // bucket); this runs that batch at load for the sizes the config allows (1, the preferred
  // sizes, max_batch_size), so the first requests do not pay for it. CPU instances need none.
  absl::Status WarmUpGpuInstances();
  static constexpr int64_t kWarmUpSteps = 100;
  // The instances, for a scheduler (which uses them until it is destroyed).
  std::vector<engine::CompiledModel*> InstancePointers() const;
  // Chooses and starts the model's one scheduler: step-level, dynamic or direct.
  absl::Status StartScheduler();
  absl::Status StartDynamic(const v1::ModelConfig& batching);
  absl::Status StartDirect();
  // Starts the step-level scheduler. FAILED_PRECONDITION, saying why, for a model that cannot
  // run that way (not causal, an input without a time axis, per-step outputs under ONNX
  // masking, max_batch_size 0); INVALID_ARGUMENT for bad settings.
  absl::Status StartCellular();
  // Which outputs are per-step and the recurrent states' shapes, from two probes.
  absl::StatusOr<batching::ChunkShape> ProbeChunkShape();
  // GPU instances run a chunk of every batch size once, so they choose their algorithms at load.
  absl::Status WarmUpCellularGpu(const batching::CellularSchedulerOptions& options);
  // Reports the load to options_.metrics and attaches the recorder; the last step of a load.
  void ReportLoaded(absl::Duration load_duration);
  // After an engine fault on `instance`: runs the load-time probe on it and logs the outcome.
  absl::Status ProbeAfterFault(int instance, const absl::Status& fault) const;
  // Follows the engine time of the last few calls (an exponential average).
  void NoteComputeTime(absl::Duration compute) const;
  bool RecentCallsAreShort() const;
  // Queues the batch on the scheduler; `done` as RunAsync's. hand_over: `done` goes to
  // ServableOptions::completions when another thread than the caller's calls it.
  struct ScheduleMode {
    bool may_run_on_caller = false;  // BatchRequest::may_run_on_caller
    bool caller_blocks = false;      // BatchRequest::caller_blocks
    bool hand_over = false;
  };
  void Schedule(engine::Batch batch, const RunOptions& options, RunDone done,
                ScheduleMode mode) const;

  const int64_t version_;
  const v1::ModelConfig config_;  // as given
  const ServableOptions options_;
  std::string source_file_;
  std::string masking_;
  std::optional<models::TrainingConfig> training_;
  absl::Status streamable_;
  LengthsSupport lengths_;
  engine::Model model_;
  std::vector<TensorSignature> inputs_;
  std::vector<TensorSignature> outputs_;
  // Each input's and output's batch_axis; model_ is the file's model batch first
  // (BatchFirstModel) when any is not 0 (moves_batch_axes_).
  std::vector<int> input_batch_axes_;
  std::vector<int> output_batch_axes_;
  bool moves_batch_axes_ = false;
  std::vector<InstanceInfo> instance_info_;
  std::vector<std::unique_ptr<engine::CompiledModel>> instances_;
  // How instance 0 was made; RunWithLogits compiles its copy of the model the same way.
  engine::EngineOptions first_engine_;
  engine::CompileOptions first_compile_;
  // RunWithLogits's compiled copies, by output; a caller holds the lock while it runs one.
  mutable absl::Mutex logits_mu_;
  mutable std::map<int, std::unique_ptr<engine::CompiledModel>> logits_models_
      ABSL_GUARDED_BY(logits_mu_);
  // The one place serving metrics are recorded; attached at the end of the load, before the
  // servable is handed out, and records nothing before. The batcher's workers report to it.
  ServingRecorder recorder_;
  // ServableOptions::run_on_caller_budget, resolved for this model's instances at load.
  absl::Duration run_on_caller_budget_;
  // NoteComputeTime's average; updated by the scheduler's threads, so declared before it.
  mutable std::atomic<int64_t> recent_compute_ns_{0};
  std::string scheduler_reason_;
  // The one scheduler, set by StartScheduler. Declared after instances_ and recorder_, so it
  // stops (answering what it has not started, joining its threads, which use both) before
  // they are destroyed. batcher_ and cellular_ view it when it is of that kind.
  std::unique_ptr<batching::Scheduler> scheduler_;
  batching::DynamicBatcher* batcher_ = nullptr;
  batching::CellularScheduler* cellular_ = nullptr;
};

}  // namespace rnnserve::server
