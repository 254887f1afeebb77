#pragma once

// The Engine contract: compile a Model into instances that run batches.
//
// A CompiledModel owns its weights in the engine's preferred layout and its scratch, both
// allocated at compile time. Run() is used by one scheduler thread at a time per instance; the
// scheduler makes as many instances as the config asks for.

#include <cstdint>
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
};

struct CompileOptions {
  // Threads the CPU engine may use inside one Run; 0 means every core.
  int num_threads = 0;
  MathMode math_mode = MathMode::kFp32;
  CpuWeights cpu_weights = CpuWeights::kFp32;
  // Largest batch a Run takes (scratch is sized for it); 0 means 64, grown on demand.
  int max_batch_size = 0;
  // GPU engine: capture a batch whole into a CUDA graph the second time its shape comes, and
  // replay it from then on (engine/cuda/cuda_model.h). Other engines ignore it.
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
};

// Where a layer runs, and why (for metadata and the log).
struct LayerPlacement {
  std::string layer;
  std::string engine;
  std::string reason;
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
};

class Engine {
 public:
  virtual ~Engine() = default;
  // kCpu always succeeds; kCuda fails with UNAVAILABLE where there is no GPU or the build has
  // no CUDA.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);

  virtual absl::StatusOr<std::unique_ptr<CompiledModel>> Compile(
      const Model& model, const CompileOptions& options) const = 0;
  virtual std::string name() const = 0;
};

// True when this build has the CUDA engine and a GPU is visible.
bool CudaAvailable(std::string* why_not);

}  // namespace rnnserve::engine
