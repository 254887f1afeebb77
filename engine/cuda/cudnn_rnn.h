#pragma once

// One recurrent layer (LSTM, GRU reset_after, simple tanh/relu RNN; one or two directions;
// optional LSTM projection) on cuDNN 9's v8 API.
//
// Contract:
// - Weights are packed once, at Create, from the IR's canonical layout (W [G*H, I],
//   R [G*H, H'], bW, bR per direction, gates i,f,g,o / r,z,n: cuDNN's own order) into the
//   weight space that cudnnGetRNNWeightParams describes, converted to FP16/BF16 for those modes.
// - Inputs and outputs are batch-major and padded ([B, T, I] in, [B, T, dirs*H'] out:
//   CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, padded IO enabled) with per-sequence lengths;
//   cuDNN computes no padded step. Keras masking is applied after cuDNN: for a forward
//   direction of a Keras layer the steps past a sequence's length repeat its last output;
//   everywhere else they are zero (ONNX, Keras's Bidirectional, the backward direction).
// - The workspace is allocated on first use for a shape and reused; it only grows.
// - The algorithm (standard, persistent static, persistent static small-H, persistent dynamic;
//   in FP32 and TF32 also standard on sequence-major copies; our fused exact FP32 LSTM or GRU
//   (reset_after), grid, register or cluster kernel for batches up to FusedRnn::kMaxBatch,
//   batch-tiled kernel up to FusedRnn::kMaxBatchedBatch, for one forward direction without
//   projection, offered to TF32 layers too; in FP16/BF16 FusedRnn's cluster and register
//   kernels with R in that precision and FP32 states, batches up to FusedRnn::kMaxBatch) is
//   chosen per batch size on first sight of that size by
//   timing each one cuDNN accepts; an algorithm that returns an error is dropped.
//   ForceAlgorithm pins one (benchmarks).
//   Exact FP32 uses the standard algorithm only (the persistent kernels are not exact); a
//   persistent algorithm cuDNN refuses for a batch (e.g. padded lengths) falls back to standard.
//   Persistent dynamic is compiled by cuDNN (cudnnBuildRNNDynamic, NVRTC) once per batch size,
//   when that size is first timed; it is timed and used for batches whose sequences all have
//   the full length only (it takes no per-sequence lengths), and NOT_SUPPORTED drops it for
//   that size.
// - Batches replay a CUDA graph per shape: the second batch with the same shape, lengths and
//   buffers is captured, later ones replay it. cuDNN's standard algorithm launches kernels per
//   step, which bounds small batches and, in half precision, large ones too (on an H200, B=1024
//   T=50 H=512 FP16: 1.44 ms eager, 1.24 ms replayed).
// - Every CUDA/cuDNN failure is returned as INTERNAL with the call named; nothing aborts.
// - Not thread-safe: one caller at a time, like the CompiledModel that owns it.

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/stack_timing.h"
#include "engine/cudnn_support.h"
#include "engine/engine.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

class FusedRnn;

// Not a cuDNN algorithm: FusedRnn, our exact-FP32 persistent LSTM / GRU for small batches,
// chosen (by timing, like cuDNN's algorithms) for exact-FP32 layers it can run.
inline constexpr cudnnRNNAlgo_t kFusedAlgo = static_cast<cudnnRNNAlgo_t>(100);
// FusedRnn's thread-block-cluster kernel, where it has one for the layer's width and the
// device runs it; chosen by timing like the others.
inline constexpr cudnnRNNAlgo_t kFusedClusterAlgo = static_cast<cudnnRNNAlgo_t>(101);
// cuDNN's standard algorithm on sequence-major copies of x and y (FP32 and TF32; half
// precision always runs sequence-major). Large batches run faster so even with the two
// transposes; chosen by timing like the others.
inline constexpr cudnnRNNAlgo_t kStandardSeqMajorAlgo = static_cast<cudnnRNNAlgo_t>(102);
// FusedRnn's batch-tiled grid kernel (batches up to FusedRnn::kMaxBatchedBatch), where the
// layer's width fits it on the device; chosen by timing like the others.
inline constexpr cudnnRNNAlgo_t kFusedBatchedAlgo = static_cast<cudnnRNNAlgo_t>(103);
// One of FusedRnn's kernels (they read each row's length on the device).
inline bool IsFused(cudnnRNNAlgo_t algo) {
  return algo == kFusedAlgo || algo == kFusedClusterAlgo || algo == kFusedBatchedAlgo;
}

struct RecurrentIO {
  int B = 0;
  int T = 0;
  absl::Span<const int32_t> lengths;     // host, size B, each in [1, T]
  const int32_t* lengths_dev = nullptr;  // the same lengths on the device
  const float* x = nullptr;              // [B, T, I]
  const float* h0 = nullptr;             // [dirs, B, H'] or null (zeros)
  const float* c0 = nullptr;             // [dirs, B, H] or null (zeros); LSTM only
  float* y = nullptr;                    // [B, T, dirs*H'], or null when the sequence is not wanted
  float* hy = nullptr;                   // [dirs, B, H'] final output per direction (required)
  float* cy = nullptr;     // [dirs, B, H] final cell state per direction; LSTM, may be null
  bool continues = false;  // engine::Batch::continues (Keras step masks: repeat h0, not zeros)
};

// Copies a batch's lengths, states, output pointers and sizes into a fused kernel's arguments
// (FusedRnnArgs, FusedRecurrentArgs).
template <typename KernelArgs>
void SetBatchArgs(const RecurrentIO& io, KernelArgs* a) {
  a->lengths = io.lengths_dev;
  a->h0 = io.h0;
  a->c0 = io.c0;
  a->y = io.y;
  a->hy = io.hy;
  a->cy = io.cy;
  a->B = io.B;
  a->T = io.T;
}

// Keras: a masked step (past a sequence's length) of a forward direction repeats the last
// output. Run after a kernel that wrote zeros there (cuDNN, FusedRnn); nothing for full
// batches, ONNX/PyTorch layers or zero_output_for_mask.
absl::Status RepeatKerasLastOutputs(const RecurrentSpec& spec, const RecurrentIO& io,
                                    cudaStream_t stream);

class CudnnRecurrent {
 public:
  static absl::StatusOr<std::unique_ptr<CudnnRecurrent>> Create(const RecurrentSpec& spec,
                                                                const std::string& name,
                                                                MathMode math, cudnnHandle_t handle,
                                                                cudaStream_t stream);
  ~CudnnRecurrent();
  CudnnRecurrent(const CudnnRecurrent&) = delete;
  CudnnRecurrent& operator=(const CudnnRecurrent&) = delete;

  // Enqueues the layer on the stream; does not synchronise (except while choosing an
  // algorithm for a new batch size).
  absl::Status Forward(const RecurrentIO& io);

  // A layer of a stack and its batch, for ForwardStack.
  struct StackEntry {
    CudnnRecurrent* rnn = nullptr;
    RecurrentIO io;
  };
  // Runs `layers`, a stack (bottom first; each one's x is the sequence of the one below, io.y,
  // with the same batch and lengths), as runs of layers in one launch of FusedRnn's stacked
  // register kernel each (layer l + 1's step t beside layer l's t + 1): from the bottom, as many
  // layers as stack on each other (FusedRnn::Stacks) and fit on the device at once
  // (FusedRnn::max_stack_layers), a layer left alone running on its own algorithm; where that
  // was faster than every layer one after the other on its own algorithm, timed with the first
  // batch of each size and step bucket; else each layer's Forward in turn. Batches up to
  // FusedRnn::kMaxBatch only are stacked.
  static absl::Status ForwardStack(const std::vector<StackEntry>& layers);
  absl::Status ForwardStack(const RecurrentIO& io, CudnnRecurrent& upper,
                            const RecurrentIO& upper_io) {
    return ForwardStack({{this, io}, {&upper, upper_io}});
  }
  // How ForwardStack with this layer at the bottom runs B sequences of T steps: "stacked 2/u8"
  // (the layers of each launch, the first one's units a block), "apart", or "" before the first
  // such batch.
  std::string StackFor(int B, int T) const;

  // Pins an algorithm for every batch size (FAILED_PRECONDITION if cuDNN refused it at
  // Create). Benchmarks use this to report each algorithm.
  absl::Status ForceAlgorithm(cudnnRNNAlgo_t algo);
  // The algorithm used for B sequences of T steps ("" before the first such batch).
  std::string AlgorithmFor(int B, int T) const;
  // What each of the fused algorithm's grid, register and one-block kernels and each shape of
  // the batch-tiled kernel took when timed for batches of B (FusedRnn::GridTimingsFor,
  // BatchedTimingsFor; "" if none was).
  std::string FusedTimingsFor(int B) const;
  // Every timed choice so far, e.g. "B=1 T<=128: fused_cluster_fp32, B=5..8 T<=128: standard".
  std::string ChoicesSummary() const;
  // Algorithms cuDNN accepted for this layer at Create (and the fused kernels offered).
  std::vector<cudnnRNNAlgo_t> algorithms() const;

  // Off: every batch is launched eagerly (benchmarks compare both).
  void set_use_graphs(bool on) { use_graphs_ = on; }
  // Whether the last Forward's launches depend on every row's length on the host (cuDNN's own
  // algorithms with padded rows), not only on the longest (the fused kernels read the lengths
  // on the device): a captured graph of that batch replays only for the same lengths.
  bool last_bakes_lengths() const { return last_bakes_lengths_; }

  int directions() const { return dirs_; }
  int hidden() const { return H_; }
  int output_size() const { return Hp_; }
  int64_t memory_bytes() const;

 private:
  CudnnRecurrent(const RecurrentSpec& spec, std::string name, MathMode math, cudnnHandle_t handle,
                 cudaStream_t stream);
  absl::Status Init();
  // INVALID_ARGUMENT unless io has B >= 1 lengths, each in [1, T].
  absl::Status CheckBatch(const RecurrentIO& io) const;
  cudnnStatus_t SetDescriptor(cudnnRNNDescriptor_t desc, cudnnRNNAlgo_t algo) const;
  // descs_[algo], or PERSIST_DYNAMIC's descriptor built for batch size B.
  absl::StatusOr<cudnnRNNDescriptor_t> DescriptorFor(cudnnRNNAlgo_t algo, int B);
  // AlgoName, and for the half-weight cluster kernel which one runs batches of B.
  std::string NameFor(cudnnRNNAlgo_t algo, int B) const;
  // Whether `algo` can still run: fused kernels and cuDNN algorithms that failed are dropped.
  bool Available(cudnnRNNAlgo_t algo) const;
  absl::Status PackWeights();
  absl::Status SetShape(const RecurrentIO& io);
  absl::Status SetDataDescriptors(cudnnRNNDataLayout_t layout, const RecurrentIO& io,
                                  cudnnRNNDataDescriptor_t x, cudnnRNNDataDescriptor_t y);
  // Whether `algo` runs on sequence-major copies of x and y: always in half precision (the
  // conversion makes the copy anyway), and kStandardSeqMajorAlgo.
  bool SeqMajor(cudnnRNNAlgo_t algo) const;
  absl::Status Launch(cudnnRNNAlgo_t algo, const RecurrentIO& io);
  absl::StatusOr<cudnnRNNAlgo_t> ChooseAlgorithm(const RecurrentIO& io);
  // Conversions, cuDNN and the masking kernel for one batch, on the stream.
  absl::Status Enqueue(cudnnRNNAlgo_t algo, const RecurrentIO& io);
  absl::Status EnqueueWithGraph(cudnnRNNAlgo_t algo, const RecurrentIO& io);
  std::string GraphKey(cudnnRNNAlgo_t algo, const RecurrentIO& io) const;

  static constexpr size_t kMaxGraphs = 64;
  static constexpr size_t kMaxSeen = 4096;

  // Fixed at construction.
  const RecurrentSpec spec_;
  const std::string name_;
  const MathMode math_;
  const cudnnHandle_t handle_;
  const cudaStream_t stream_;
  const int dirs_;
  const int I_, H_, Hp_;
  const cudnnDataType_t dtype_;  // FLOAT, HALF or BFLOAT16

  std::unique_ptr<FusedRnn> fused_;  // exact FP32, small batches; null when it does not fit

  // One RNN descriptor per algorithm cuDNN accepted; all share one weight layout.
  std::map<cudnnRNNAlgo_t, cudnnRNNDescriptor_t> descs_;
  std::map<int, cudnnRNNDescriptor_t> dynamic_by_batch_;  // PERSIST_DYNAMIC built per batch size
  // Chosen by timing, per batch-size bucket and time-step bucket (BatchBucket, StepBucket: B and
  // T rounded up to powers of two): a probe of 2 steps does not choose for batches of 100, and a
  // batcher's batch sizes 33..64 share one timing.
  std::map<std::pair<int, int>, cudnnRNNAlgo_t> algo_by_batch_;
  // ForwardStack's choice per batch size and step bucket (this layer at the bottom): the layers
  // of each launch, bottom first (1: a layer on its own); empty: every layer apart.
  StackChoices stack_by_batch_;
  bool varlen_standard_only_ = false;  // a persistent algorithm failed on padded lengths
  bool forced_ = false;
  cudnnRNNAlgo_t forced_algo_ = CUDNN_RNN_ALGO_STANDARD;

  bool use_graphs_ = true;
  bool last_bakes_lengths_ = false;
  std::set<std::string> seen_;                     // shapes run once (GraphKey)
  std::map<std::string, cudaGraphExec_t> graphs_;  // shapes captured

  // The batch's x and y as batch-major model values (FP32/TF32) and as the sequence-major
  // copies x_seq_, y_seq_ (SeqMajor).
  cudnnRNNDataDescriptor_t x_desc_ = nullptr;
  cudnnRNNDataDescriptor_t y_desc_ = nullptr;
  cudnnRNNDataDescriptor_t x_seq_desc_ = nullptr;
  cudnnRNNDataDescriptor_t y_seq_desc_ = nullptr;
  cudnnTensorDescriptor_t h_desc_ = nullptr;
  cudnnTensorDescriptor_t c_desc_ = nullptr;

  DeviceBuffer weights_;  // cuDNN's weight space, packed once
  size_t weight_bytes_ = 0;
  DeviceBuffer workspace_;  // grows to the largest shape seen
  DeviceBuffer y_scratch_;  // [B, T, dirs*H'] when the caller wants no sequence
  // x [T, B, I] and y [T, B, dirs*H'] for the runs that are SeqMajor, in the layer's data type.
  DeviceBuffer x_seq_, y_seq_;
  // FP16/BF16: the half-precision states cuDNN reads and writes.
  DeviceBuffer h0_half_, c0_half_, hy_half_, cy_half_;
};

}  // namespace rnnserve::engine::cuda
