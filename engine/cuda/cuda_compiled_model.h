#pragma once

// The GPU engine's compiled model (cuda_model.h says what it does): its per-layer plans and the
// class, shared by cuda_model.cc (compile, run, non-recurrent layers) and
// cuda_model_recurrent.cc (recurrent layers). Internal to engine/cuda.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/dev_value.h"
#include "engine/cuda/device_layers.h"
#include "engine/cuda/fused_recurrent.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/pinned_pool.h"
#include "engine/engine.h"
#include "engine/host_fallback.h"
#include "engine/lengths_rewrite.h"
#include "engine/slot_states.h"
#include "engine/step_loop.h"

namespace rnnserve::engine::cuda {

enum class Where { kGpu, kCpu };

struct LayerPlan {
  Where where = Where::kGpu;
  std::string reason;
  std::unique_ptr<CudnnRecurrent> rnn;  // cuDNN placement
  // The layers cuDNN cannot run; beside cuDNN, the batches it cannot run (a sequence of length
  // 0, masked steps inside a sequence). Null when the layer does not fit the kernel.
  std::unique_ptr<FusedRecurrent> fused;
  // Beside `fused`, for a layer cuDNN cannot run that FusedRnn can (GRU reset_after=False at the
  // register kernel's widths, or from 128 units on the batch-tiled kernel): the batches it takes
  // (FusedRnn::Takes: up to 8 or 64 sequences, none of length 0, no masked steps inside a
  // sequence).
  std::unique_ptr<FusedRnn> fused_rnn;
  std::unique_ptr<HostRecurrent> cpu_rnn;  // CPU placement and stateful batches (host_)
  DeviceBuffer kernel, bias;               // Dense [in, out], [out]; Embedding table
  DeviceBuffer hy, cy, y, h0, c0;          // recurrent scratch
  bool device_layer = false;               // run by RunDeviceLayer (device_layers.h)
  // A recurrent layer on cuDNN's placement whose next layer is one too, of one direction,
  // reading this layer's sequence and nothing else: a chain of such layers runs through
  // CudnnRecurrent::ForwardStack (runs of layers in one launch where that is faster). Layers
  // cuDNN cannot run (on FusedRnn) whose FusedRnn stack (FusedRnn::Stacks) do likewise
  // through FusedRnn::ForwardChain.
  bool stacks_on_next = false;
  DeviceLayerState device;
};

class CudaCompiledModel final : public CompiledModel, public StepLoopSource {
 public:
  CudaCompiledModel(LengthsRewrite rewrite, const CompileOptions& options, int device,
                    std::shared_ptr<const HostFallback> host)
      : model_(std::move(rewrite.model)),
        lengths_honored_(std::move(rewrite.honored)),
        sequence_inputs_(std::move(rewrite.sequence_inputs)),
        time_major_(rewrite.time_major),
        options_(options),
        device_(device),
        host_(std::move(host)) {}
  ~CudaCompiledModel() override;

  absl::Status Init();
  absl::Status Run(const Batch& batch, std::vector<Tensor>* outputs) override;
  std::string engine_name() const override { return "cuda"; }
  std::vector<LayerPlacement> placements() const override;
  int64_t memory_bytes() const override;
  // Page-locked and zeroed (pageable when the host cannot pin more).
  Tensor NewHostTensor(DType dtype, Shape shape) const override;
  // Slot states in device memory, for one-direction recurrent layers (cuda_model_slots.cc);
  // null (the host's) for other layers.
  absl::StatusOr<std::unique_ptr<SlotStates>> NewSlotStates(const StateRows& rows,
                                                            int capacity) override;
  // The resident step loop (resident_step_loop.cc).
  std::string StepLoopUnsupported() const override;
  absl::StatusOr<std::unique_ptr<StepLoop>> NewStepLoop(int capacity, int max_steps) override;
  RunCounters counters() const override {
    return {.host_copies_in_last_run = host_copies_in_last_run_,
            .graph_replays = graph_replays_,
            .graph_note = graph_note_};
  }
  // Its cuDNN algorithms and persistent kernels are chosen by timing, per batch size and step
  // bucket (cudnn_rnn.h, fused_rnn.h, stack_timing.h).
  bool times_kernels_per_shape() const override { return true; }
  const PinnedPool& pinned_pool() const { return *pinned_; }

 private:
  friend class CudaSlotStates;

  // Whole-batch CUDA graphs (cuda_model_graph.cc). A batch whose key (GraphKeyOf) ran eagerly
  // once is captured whole the next time: its uploads, every layer's launches and its output
  // downloads, one graph. Later batches with the key replay it: their inputs, lengths and slot
  // numbers are copied into the graph's own page-locked area, one launch, one wait. Batches
  // whose launches depend on more than the key (ids checked on the host, masks derived there,
  // the request's INT64 values read there, host values computed from the request's, states
  // from or to the host, host layers reading device values) are never replayed.
  struct ModelGraph {
    // Where a graph's variable uploads come from at replay.
    struct Source {
      enum class Kind { kInput, kLengths, kSlots } kind;
      int index = 0;  // kInput: the batch input
      size_t offset = 0, bytes = 0;
    };
    ModelGraph() = default;
    ModelGraph(const ModelGraph&) = delete;
    ModelGraph& operator=(const ModelGraph&) = delete;
    ~ModelGraph();
    cudaGraphExec_t exec = nullptr;
    uint64_t generation = 0;     // DeviceBuffer::Generation() when captured
    bool exact_lengths = false;  // a layer's launches bake every row's length in
    std::vector<int32_t> lengths;
    PinnedStaging staging;  // the graph's uploads read from here
    std::vector<Source> sources;
    std::vector<Tensor> outputs;  // page-locked; the graph's downloads write here
    std::vector<int> output_of;   // per model output, its index in outputs
    size_t held_bytes = 0;        // page-locked bytes of staging and outputs
  };
  // What a Run's upload is, for a graph being captured.
  enum class UploadKind { kConstant, kInput, kLengths, kSlots, kOther };
  struct Capture {
    ModelGraph* graph = nullptr;
    bool replayable = true;
    const char* why = "";
  };
  std::string GraphKeyOf(const Batch& batch) const;
  // true when the batch was answered by a replay.
  absl::StatusOr<bool> Replay(const std::string& key, const Batch& batch,
                              std::vector<Tensor>* outputs);
  // Captures the batch into a graph and launches it; false when it could not be captured (the
  // caller runs it eagerly; the key runs eagerly from then on unless only an allocation
  // elsewhere spoilt the capture).
  absl::StatusOr<bool> RunCaptured(const std::string& key, const Batch& batch,
                                   std::vector<Tensor>* outputs);
  void ClearGraphs();
  // A copy of a graph's output for the caller (page-locked when the pool can).
  Tensor CopyOut(const Tensor& t) const;
  void NotReplayable(const char* why) {
    if (capture_ != nullptr && capture_->replayable) {
      capture_->replayable = false;
      capture_->why = why;
    }
  }
  // Stages the inputs, runs every layer and enqueues the outputs' downloads (no wait).
  absl::Status EnqueueBatch(const Batch& batch);
  // Between two layers of an eager run whose Batch::stop is set: waits until the GPU has run
  // all but the layer enqueued last, then asks stop (engine/engine.h).
  absl::StatusOr<bool> StoppedBeforeLayer(const Batch& batch);
  // The model outputs into `outputs` after the downloads completed.
  void CollectOutputs(std::vector<Tensor>* outputs);
  PinnedStaging& staging() { return capture_ != nullptr ? capture_->graph->staging : staging_; }
  // Where a Run's rows take their initial states from and leave their final states: the slot
  // of each row, and per layer (plans_ index) the slot stores h [capacity, H'] and, for LSTM,
  // c [capacity, H]; null for a layer without slots. Run copies the rows' slots to
  // slot_rows_dev_ with its other inputs.
  struct SlotBinding {
    const std::vector<int32_t>* rows = nullptr;  // [B]
    std::vector<std::array<float*, 2>> stores;
  };
  // The binding's stores of layer `plan`, or null outside a slot run or for a layer without.
  const std::array<float*, 2>* SlotStore(const LayerPlan& plan) const;
  // The layer's rows' slot states to the host (for the CPU kernel), and its final states back.
  absl::StatusOr<std::vector<Tensor>> SlotStatesToHost(const RecurrentSpec& spec, LayerPlan& plan,
                                                       const std::array<float*, 2>& store, int B);
  absl::Status SlotStatesFromHost(const RecurrentSpec& spec, LayerPlan& plan,
                                  const std::array<float*, 2>& store,
                                  const std::vector<Tensor>& finals, int B);

  absl::Status PlanLayer(const Layer& layer, LayerPlan* plan);
  absl::Status Upload(const float* src, int64_t n, DeviceBuffer* dst);
  // A host value to the device; from the pinned staging area when it is in pageable memory
  // (one asynchronous DMA, no stream synchronisation first).
  absl::Status ToDevice(DevValue* v);
  // Enqueues a small host-to-device copy through the staging area; `kind` and `index` say
  // what it is to a graph being captured.
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes, const char* what,
                            UploadKind kind = UploadKind::kOther, int index = 0);
  absl::Status ToHost(DevValue* v) {
    if (!v->host_valid) ++host_copies_;
    return cuda::ToHost(v, stream_);
  }
  absl::Status RunLayer(size_t index, const Batch& batch);
  // Enqueues the copy of each device-only model output into a pinned tensor of the pool (one
  // DMA each, no page faults); the caller waits once for the stream.
  absl::Status EnqueueDownloads();

  // Which of a layer's GPU kernels runs a batch: cuDNN (LayerPlan::rnn), FusedRnn
  // (LayerPlan::fused_rnn) or the fused recurrent kernel (LayerPlan::fused).
  enum class RecurrentKernel { kCudnn, kFusedRnn, kFusedRecurrent };
  // Recurrent layers (cuda_model_recurrent.cc), on `kernel`. Initial states from the layer's
  // state inputs or batch.initial_states; final states into batch.final_states when set.
  absl::Status RunRecurrentGpu(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                               RecurrentKernel kernel, const Batch& batch);
  absl::Status RunRecurrentCpu(const Layer& layer, LayerPlan& plan, const Batch& batch);
  // Whether a recurrent layer's input has no sequence of length 0 and no masked step inside a
  // sequence: what cuDNN and FusedRnn can run.
  static bool PlainSequences(const DevValue& in) {
    return in.step_mask.empty() &&
           std::find(in.lengths.begin(), in.lengths.end(), 0) == in.lengths.end();
  }
  // A recurrent layer's batch on the GPU: its lengths, initial states and outputs' places
  // (Begin), then after its kernel the final states and outputs (End).
  struct RecurrentRun {
    std::vector<int32_t> lengths;  // io.lengths
    RecurrentIO io;
    const std::array<float*, 2>* slots = nullptr;  // SlotStore
    bool direct = false;                           // the sequence written into the output value
  };
  absl::Status BeginRecurrentGpu(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                                 const Batch& batch, RecurrentRun* run);
  absl::Status EndRecurrentGpu(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                               const Batch& batch, const RecurrentRun& run);
  // The chain of layers from `index` that stack (LayerPlan::stacks_on_next) together, through
  // CudnnRecurrent::ForwardStack where the batch is one they all run on cuDNN's path, or
  // FusedRnn::ForwardChain where they are layers cuDNN cannot run and FusedRnn takes the batch;
  // returns the layers run (0: none, the batch runs layer by layer).
  absl::StatusOr<size_t> RunRecurrentStack(size_t index, const Batch& batch);
  // The initial states into plan.h0 [dirs, B, H'] and plan.c0 [dirs, B, H]; false when the
  // batch gives none (zeros).
  absl::StatusOr<bool> UploadInitialStates(const Layer& layer, const RecurrentSpec& spec,
                                           LayerPlan& plan, const Batch& batch, int B);
  // Where the sequence output [B, T, dirs*H'] goes: straight into the layer's output value
  // when no merge follows (`direct`), else plan.y. Null without return_sequences.
  absl::StatusOr<float*> SequenceTarget(const Layer& layer, const RecurrentSpec& spec,
                                        LayerPlan& plan, int B, int T, bool direct);
  // batch.final_states[layer] from plan.hy / plan.cy (waits for the stream).
  absl::Status DownloadFinalStates(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                                   int B, const Batch& batch);
  // The layer's main output(s) from y (sequences) or plan.hy, merged per merge mode; returns
  // the index of the first state output.
  absl::StatusOr<size_t> WriteMainOutputs(const Layer& layer, const RecurrentSpec& spec,
                                          LayerPlan& plan, int B, int T, const float* y,
                                          bool direct);
  // return_state: the final states as outputs next_output, ... (h, then c for LSTM, per
  // direction).
  absl::Status WriteStateOutputs(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                                 int B, size_t next_output);
  absl::Status RunDense(const Layer& layer, const DenseSpec& spec, LayerPlan& plan);
  absl::Status RunEmbedding(const Layer& layer, const EmbeddingSpec& spec, LayerPlan& plan);
  absl::Status RunCpuLayer(const Layer& layer);
  // kGatherAtLengths, kZeroPastLengths on the device (cuda_model_lengths.cc).
  absl::Status RunLengthsOp(const Layer& layer, const TensorOpSpec& op, const Batch& batch);

  const Model model_;  // with the lengths ops put in (engine/lengths_rewrite.h)
  // OK, or why a batch with lengths is refused; which inputs the lengths describe.
  const absl::Status lengths_honored_;
  const std::vector<bool> sequence_inputs_;
  const bool time_major_;
  const CompileOptions options_;
  const int device_;
  // The CPU engine's kernels, for the layers and batches placed on the host (never null).
  const std::shared_ptr<const HostFallback> host_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<LayerPlan> plans_;      // one per layer
  std::vector<DevValue> values_;      // one per model value; reused across batches
  DeviceBuffer lengths_dev_;          // [B] int32, the lengths of the recurrent layer running
  DeviceBuffer request_lengths_dev_;  // [B] int32, the lengths of the lengths op running
  DeviceBuffer step_mask_dev_;        // [B, T] uint8, its step mask when it has one
  // Slots for the layers run on the host (RunCpuLayer); empty between layers.
  std::vector<HostValue> host_values_;
  // Inputs and outputs in page-locked memory. Free blocks kept: the largest batch's inputs and
  // outputs twice over (a response may still be encoding while the next batch runs).
  static constexpr size_t kMaxCachedPinnedBytes = size_t{1} << 30;
  std::shared_ptr<PinnedPool> pinned_ = PinnedPool::Create(kMaxCachedPinnedBytes);
  PinnedStaging staging_;
  bool stream_idle_ = true;  // the last Run waited for its copies (it returned OK)
  // StoppedBeforeLayer's events, recorded after the layers enqueued so far in turn, and how
  // many it recorded in this run.
  std::array<cudaEvent_t, 2> layer_done_ = {nullptr, nullptr};
  int64_t layers_in_flight_ = 0;
  int64_t host_copies_ = 0;  // device-to-host copies of the running batch
  int64_t host_copies_in_last_run_ = 0;
  const SlotBinding* slots_ = nullptr;  // set for the length of a SlotStates::Run
  DeviceBuffer slot_rows_dev_;          // [B] int32: slots_->rows on the device

  static constexpr size_t kMaxGraphs = 256;
  static constexpr size_t kMaxGraphKeys = 4096;
  static constexpr int64_t kMaxGraphSteps = 128;
  static constexpr size_t kMaxGraphInputBytes = size_t{4} << 20;
  static constexpr size_t kMaxGraphBytes = size_t{256} << 20;  // page-locked, all graphs
  // CompileOptions::whole_batch_graphs, and no model layer that reads the request's values on
  // the host (Init).
  bool use_graphs_ = true;
  const Batch* batch_ = nullptr;  // the batch EnqueueBatch runs
  // Per value of the running batch: 1 when its host copy follows from the batch's shapes alone
  // (a Shape op, shape arithmetic over such values), so a graph may keep its bytes; 0 for the
  // request's values and what the host computes from them.
  std::vector<uint8_t> clean_;
  Capture* capture_ = nullptr;  // set while a batch is captured
  // Keys run eagerly once (true) or that cannot be replayed (false).
  std::map<std::string, bool> graph_keys_;
  std::map<std::string, std::unique_ptr<ModelGraph>> graphs_;
  int64_t graph_replays_ = 0;
  size_t graph_bytes_ = 0;  // ModelGraph::held_bytes of graphs_
  std::string graph_note_;
};

}  // namespace rnnserve::engine::cuda
