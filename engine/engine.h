#pragma once

// The Engine contract: compile a Model into instances that run batches.
//
// A CompiledModel owns its weights in the engine's preferred layout and its scratch, both
// allocated at compile time. Run() is used by one scheduler thread at a time per instance; the
// scheduler makes as many instances as the config asks for. What an engine supports beyond Run
// (slot states in its own memory, counters, timing per shape) it says through CompiledModel's
// virtual methods, never through its name or a cast. docs/architecture.md describes the
// contract and the layers (this header is the engine core's: it names no engine).
//
// Every setting is an option here, read once by the caller (the server's main.cc reads the
// environment variables RNNSERVE_CPU_KERNELS and RNNSERVE_GPU_MODEL_GRAPHS into them); nothing
// in engine/ reads the environment.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

enum class EngineKind { kCpu, kCuda };

enum class MathMode { kFp32, kTf32, kFp16, kBf16 };

// How the CPU engine stores the weights of recurrent layers (W, R and, where present, GRU's
// R_n and LSTM's projection P): FP32, bfloat16 or per-channel int8, with FP32 state and FP32
// accumulation (engine/cpu/quant_gemm.h; accuracy bounds in docs/precision.md). The GPU engine
// ignores it (its math_mode is the GPU's setting).
enum class CpuWeights { kFp32, kBf16, kInt8 };

struct EngineOptions {
  EngineKind kind = EngineKind::kCpu;
  int device = 0;  // GPU ordinal for kCuda
  // The CPU engine's kernel set (engine/cpu/panel_gemm.h), which the GPU engine's host fallback
  // runs too: "" keeps the one chosen already, by default the widest this CPU has (CPUID);
  // "amx" (avx512 with AMX tiles for BF16 and INT8 weights), "avx512", "avx2" or "plain" forces
  // one (the server takes it from RNNSERVE_CPU_KERNELS).
  // One set runs per process, chosen before the first kernel runs: Create fails with
  // FAILED_PRECONDITION when another set runs already. An unknown name (INVALID_ARGUMENT) or a
  // set this CPU lacks (FAILED_PRECONDITION) makes the CPU engine refuse to compile.
  std::string cpu_kernels;
};

struct CompileOptions {
  // Threads the CPU engine may use inside one Run; 0 means every core.
  int num_threads = 0;
  MathMode math_mode = MathMode::kFp32;
  CpuWeights cpu_weights = CpuWeights::kFp32;
  // Largest batch a Run takes (scratch is sized for it); 0 means 64, grown on demand.
  int max_batch_size = 0;
  // GPU engine: capture a batch whole into a CUDA graph the second time its shape comes, and
  // replay it from then on (engine/cuda/cuda_model.h). Other engines ignore it. The server turns
  // it off for a model whose config.pbtxt says gpu_graphs: GPU_GRAPHS_OFF, and for every model
  // when RNNSERVE_GPU_MODEL_GRAPHS=0.
  bool whole_batch_graphs = true;
};

// One batch of sequences. Every input is [B, T, ...] (or [B, ...] for non-sequence inputs).
struct Batch {
  std::vector<Tensor> inputs;  // in Model::inputs order
  // Per-sequence lengths, size B, each in [0, T] (engine/lengths.h: the rule, and what 0
  // means). Empty: every sequence uses the full T, or the lengths the model's own masking
  // (Masking, Embedding mask_zero) implies.
  std::vector<int32_t> lengths;
  // Initial states of recurrent layers, by layer name (Layer::name), in the order of the
  // layer's state outputs: per direction h [B, H'] then, for LSTM, c [B, H]. A layer not named
  // here starts from zeros (or from the state inputs its graph wires to it).
  std::map<std::string, std::vector<Tensor>> initial_states;
  // When set, Run fills it with every recurrent layer's final states, same keys and order as
  // initial_states: the state after each sequence's last valid step (what a stateful sequence
  // carries into its next chunk).
  std::map<std::string, std::vector<Tensor>>* final_states = nullptr;
  // The initial states continue sequences that ran before (a stateful chunk, a step-level
  // batching chunk): under Keras masking, a masked step before a sequence's first valid step of
  // this batch repeats the last output, the initial h, as it would have in the whole sequence.
  // false: the batch starts its sequences, and such steps output zeros (Keras's rule at a
  // sequence's start, even with initial states given).
  bool continues = false;
  // Asked during Run, between steps, whether the batch is still wanted; when it answers true
  // Run stops at that step boundary and returns CANCELLED (outputs and final states are then
  // undefined; the instance runs the next batch as usual). The CPU engine asks before each
  // layer and every kStopCheckSteps steps of a recurrent layer; the GPU engine before the run
  // and between layers (a layer's kernels run all of its steps), not inside a whole-batch
  // graph. Called by one thread at a time, not always the same one; must be cheap and must not
  // block. Null: the run is never stopped. (The server answers true when no request with rows
  // in the batch still wants its answer: cancelled, or past its deadline.)
  std::function<bool()> stop;
};

// Steps of a recurrent layer between two questions to Batch::stop (CPU engine).
inline constexpr int64_t kStopCheckSteps = 16;

// Where a layer runs, and why (for metadata and the log).
struct LayerPlacement {
  std::string layer;
  std::string engine;
  std::string reason;
};

class SlotStates;  // engine/slot_states.h
// Per recurrent layer, the shape of each state row (the batch axis left out).
using StateRows = std::map<std::string, std::vector<Shape>>;

// What an instance counts about its runs, for tests, benchmarks and the log; zero and empty for
// an engine that has nothing of the kind.
struct RunCounters {
  // Device-to-host copies the last Run made before fetching its outputs: values that layers
  // placed on the host read. 0 for a GPU model that stays on the device, and on the CPU.
  int64_t host_copies_in_last_run = 0;
  // Batches answered by replaying a whole-batch CUDA graph.
  int64_t graph_replays = 0;
  // Why whole-batch graphs are off for this instance, or why the last batch that could not be
  // captured could not ("" when none).
  std::string graph_note;
  // Time steps the last Run's recurrent layers computed, summed over layers and directions
  // (each the steps of its longest row that ran): less than the batch's when Batch::stop
  // stopped it. CPU engine; 0 on the GPU.
  int64_t recurrent_steps_in_last_run = 0;
};

class CompiledModel {
 public:
  virtual ~CompiledModel() = default;
  // Fills one tensor per Model output, batch axis first.
  virtual absl::Status Run(const Batch& batch, std::vector<Tensor>* outputs) = 0;
  virtual std::string engine_name() const = 0;
  virtual std::vector<LayerPlacement> placements() const = 0;
  // Bytes of weights and scratch this instance holds.
  virtual int64_t memory_bytes() const = 0;
  // A zeroed host tensor in the memory this engine reads fastest, for building a batch's inputs
  // (the GPU engine's is page-locked, so the copy to the device is one DMA at full PCIe speed).
  virtual Tensor NewHostTensor(DType dtype, Shape shape) const;
  // Slot states for step-level batching kept in the engine's own memory (the GPU engine's:
  // device memory), or null where it keeps none for these layers; engine::NewSlotStates
  // (slot_states.h) then keeps them in host tensors. Default: null.
  virtual absl::StatusOr<std::unique_ptr<SlotStates>> NewSlotStates(const StateRows& rows,
                                                                    int capacity);
  virtual RunCounters counters() const { return {}; }
  // True when the engine chooses its kernels by timing them per batch shape (batch size and
  // step bucket) the first time a shape comes, and an engine call costs about as much as tens
  // of steps of a small model (launches, copies, one synchronisation): the GPU engine. A server
  // then runs a batch of each size it expects at load, so that no request pays for the timing,
  // and gives step-level chunks a fixed, longer step count.
  virtual bool times_kernels_per_shape() const { return false; }
};

class Engine {
 public:
  virtual ~Engine() = default;
  // The factory over every engine of this build (defined in engine/factory/engine_factory.cc,
  // CMake target rnnserve_engine, the one place that knows the engines). Fails when
  // cpu_kernels asks for another set than the one running; kCuda also with UNAVAILABLE where
  // there is no GPU or the build has no CUDA.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);

  virtual absl::StatusOr<std::unique_ptr<CompiledModel>> Compile(
      const Model& model, const CompileOptions& options) const = 0;
  virtual std::string name() const = 0;
};

// Defined by the engine factory too (engine/factory/engine_factory.cc):
// True when this build has the CUDA engine and a GPU is visible.
bool CudaAvailable(std::string* why_not);
// What the CPU engine runs recurrent layers with in this process, for metadata and the log:
// "CPU kernels: <set>; CPU weights: <how `weights` are stored and multiplied>".
std::string CpuKernelsNote(CpuWeights weights);

}  // namespace rnnserve::engine
