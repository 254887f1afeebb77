#pragma once

// An exact-FP32 persistent LSTM and GRU (reset_after, as cuDNN and PyTorch compute it) for the
// launch-bound case (small batches, one forward direction, no projection, sigmoid/tanh(/tanh)):
// cuDNN's persistent kernels are not exact FP32 and its standard algorithm launches kernels at
// every step, so exact FP32 at B = 1 pays ~10 us a step in launches. This runs all steps in
// one kernel instead:
//   - the input projection of every step is one cuBLAS SGEMM (FP32, no tensor cores) plus the
//     folded biases: xproj [B, T, G*H], gates i,f,g,o (LSTM) or r,z,n (GRU), bW + bR of each
//     gate except the GRU's n, whose bR (bRn) stays inside r * (R_n . h + bRn); where it is
//     small (kFusedSmallProjectionFmas) one kernel of ours with the biases instead, whose
//     single launch costs ~10 us less than cuBLAS's and the bias kernel's;
//   - the recurrent part is one cooperative launch of `blocks` blocks; block k owns hidden
//     units [k*U, (k+1)*U) and keeps their G*U rows of R [G*H, H] in shared memory for all
//     steps; each step reads h(t-1) [B, H] from a double buffer in global memory, computes its
//     gates with FP32 FMAs and precise expf/tanhf, and writes its units' h(t). There is no grid
//     barrier: each h is stored with its step's tag in one 64-bit word, and a block reads the
//     words it needs until they carry the step it waits for (FusedRnnSync), so a step costs one
//     round trip through L2 (the cooperative launch only guarantees that all blocks run at once);
//   - or, for the widths it is compiled for (H = 128, 256, 512), one thread-block cluster
//     (fused_rnn_cluster_kernel.cu) that keeps R in its blocks' shared memory and registers
//     and exchanges h(t) through distributed shared memory, so that a step costs a cluster
//     barrier instead of a grid barrier and a round trip through L2. It exists only where the
//     device can run the cluster (cudaOccupancyMaxActiveClusters), else only the grid kernel.
//   - or, for batches up to kMaxBatchedBatch, the batch-tiled grid kernel
//     (fused_rnn_batched_kernel.h): R split across the SMs by units, each block computing its
//     rows for every sequence of the batch as a register-tiled GEMM, so that a weight read
//     from shared memory serves 4 sequences instead of one; the grid kernel and the cluster
//     kernel read a block's rows once per sequence, which bounds them past B = 4. It may split
//     the batch into 2 or 4 groups of sequences, each on its own blocks holding more units'
//     rows (less of h(t-1) to read a step); its GEMM also has tensor-core tiles (mma.sync TF32),
//     for exact-FP32 layers with three TF32 products a product (FP32 accuracy; tf32_mma.cuh),
//     for TF32 layers one, timed beside the FMA tiles;
//   - or, for H = 128, 256, 512 and 1024, the register kernel (fused_rnn_kernel.h): the grid
//     kernel's exchange, with each warp holding its unit's G rows of R in registers and
//     applying that unit's cell itself, one block barrier a step; also with the batch split
//     into groups of sequences on blocks of their own, two or four blocks an SM, so that a
//     warp takes fewer sequences one after another (B = 4 to 8); and both directions of a
//     bidirectional layer, each on blocks of its own (FusedRnnArgs::dirs), in one launch, or
//     one launch after the other where their blocks do not fit on the device at once;
//   - or, for an LSTM or GRU of small H (up to kSmallMaxHidden, where the weights fit in one
//     block's shared memory, for as many sequences as fit beside them), one block that runs the
//     whole layer, input projection included, with two block barriers a step
//     (fused_rnn_small_kernel.cu): at B = 1, T = 10, H = 32 the grid kernels' round trip
//     through L2 a step costs more than the step's work; at H = 32 and 64 each thread keeps a
//     gate row of R in registers;
//   - or, for H up to kFusedBlockRegMaxHidden (LSTM, GRU reset_after True and False), the
//     one-block register kernel (fused_rnn_small_kernel.cu): each block runs the whole layer
//     for its own group of 1 to 8 sequences with 1, 2, 4 or 8 lanes a unit keeping the unit's
//     rows of R in registers, a shuffle sum and one block barrier a step, and no block waits on
//     another, so it takes any batch size (the only kernel here past kMaxBatch sequences that
//     is not the batch-tiled one); the lanes and the sequences a block are timed per batch size.
// Stacks of 2 to kFusedStackMaxLayers one-direction layers of one width run in one launch of
// the stacked register kernel (ForwardStack; FusedRnnStackArgs in fused_rnn_kernel.h): each
// layer on its own blocks, the layers above the first projecting the lower layer's h(t) in the
// kernel, so that layer l + 1's step t runs beside layer l's step t + 1 (GRU reset_after=False
// too, with its second exchange a step in each layer).
// The kernels compute the same sums in FP32 arithmetic; they differ only in the order of the
// partial sums of each dot product (FMA rounding) and, for the batch-tiled kernel's 3xTF32
// tiles, in products carried to ~2^-21 instead of 2^-24. The caller chooses between the
// cluster kernel, the batch-tiled kernel and the others by timing (CudnnRecurrent: kFusedAlgo,
// kFusedClusterAlgo, kFusedBatchedAlgo); the grid sizes and the one-block kernel are timed
// against each other here, per batch size, and so are the batch-tiled kernel's grid sizes.
// Steps past a sequence's length are not computed: its h (and c) stay, its outputs are zero.
// GRU reset_after=False (r applied before the n gate's matmul) runs on the register kernel,
// with a second exchange a step (r * h(t-1)), for the widths it is compiled for, on the
// one-block register kernel up to 64 units (any batch; r * h(t-1) through shared memory, a
// second block barrier a step), and on the batch-tiled kernel past 8 sequences and for both
// directions of a bidirectional layer (a second grid barrier and a second GEMM of every gate
// row a step, of which the n rows count); cuDNN has no
// such mode, so the model runs it for the batches these take and FusedRecurrent
// (fused_recurrent.h) for the others.
//
// For layers compiled in FP16 or BF16 (Create's `weights`), the cluster kernel, the register
// kernel and (one direction, batches up to kMaxBatchedBatch, R widened back to FP32 in its shared
// memory) the batch-tiled kernel are offered, with R rounded once to that precision (half the
// bytes: more rows a warp fit in registers) and everything else as in exact FP32: the input
// projection is the same FP32 SGEMM with FP32 W, h, c, the gates and every sum are FP32. Its error
// is the rounding of R alone, below cuDNN's half modes, which also round x, W, h and y. Every
// cluster kernel compiled for the width that runs on the device is offered, the FMA kernel (a row's
// weights read once per sequence) and the tensor-core kernel (one mma.sync serves all 8 sequences a
// batch may have; h enters it as two half terms, hi + lo, so that it keeps about 16 bits), over
// each cluster size, and the fastest is chosen per batch size by timing.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/fused_rnn_batched_kernel.h"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

class FusedRnn {
 public:
  // Batches the grid, cluster and one-block kernels take; the batch-tiled kernel takes up to
  // kMaxBatchedBatch.
  static constexpr int kMaxBatch = 8;
  static constexpr int kMaxBatchedBatch = kBatchedMaxBatch;
  static constexpr int kSmallMaxHidden = 128;
  static_assert(kMaxBatch <= kClusterMaxBatch);

  // UNIMPLEMENTED when the layer or the device does not fit (the caller keeps cuDNN): another
  // cell, activations other than sigmoid/tanh, clip, peepholes, input_forget, a projection, a
  // lone reversed direction. Two directions (forward and reverse; LSTM and both GRUs, half
  // weights LSTM and GRU) get the batch-tiled kernel, both in one launch on half the SMs each
  // (half weights: from H = 128), and the register kernel at its widths (both in one launch
  // where they fit); GRU reset_after=False (exact FP32 only) of one direction the register
  // kernel at its widths and the batch-tiled kernel from H = 128.
  // kBf16 / kFp16 `weights`: also UNIMPLEMENTED where neither a cluster kernel, the register
  // kernel nor the batch-tiled kernel runs the layer's width on this device.
  // tf32: a TF32 layer (FP32 weights): the batch-tiled kernel's tensor-core tiles round R and
  // h to TF32 instead of keeping FP32 accuracy with three TF32 products a product.
  static absl::StatusOr<std::unique_ptr<FusedRnn>> Create(
      const RecurrentSpec& spec, cudaStream_t stream,
      FusedRnnWeights weights = FusedRnnWeights::kFp32, bool tf32 = false);
  ~FusedRnn();
  FusedRnn(const FusedRnn&) = delete;
  FusedRnn& operator=(const FusedRnn&) = delete;

  // kGrid: the grid kernel (on one of its grid sizes), the register kernel or the one-block
  // kernel, whichever is faster for the batch size. kRegisters: the register kernel alone.
  enum class Kernel { kGrid, kCluster, kOneBlock, kBatched, kRegisters };

  // io as for CudnnRecurrent::Forward (c0 and cy: LSTM only), with io.B <= kMaxBatch
  // (kBatched: kMaxBatchedBatch; kGrid: any where has_one_block_registers()); enqueues, never
  // synchronises (except while timing the grid sizes for a new batch size). kCluster needs
  // has_cluster(), kOneBlock has_one_block(), kBatched has_batched(), kGrid has_grid().
  absl::Status Forward(const RecurrentIO& io, Kernel kernel = Kernel::kGrid);
  // Kernel::kGrid runs: the grid kernel (exact FP32 only), the register kernel or the one-block
  // kernels.
  bool has_grid() const { return !grids_.empty() || !reg_units_.empty() || block_reg_; }
  bool has_cluster() const { return !clusters_.empty(); }
  FusedRnnWeights weights() const { return weights_; }
  bool has_one_block() const { return small_max_batch_ > 0; }
  // The largest batch the one-block kernel takes (its shared memory holds every sequence's
  // states beside the weights); 0 when it is not offered.
  int one_block_max_batch() const { return small_max_batch_; }
  // Whether the one-block register kernel (H up to kFusedBlockRegMaxHidden, one direction,
  // exact FP32; fused_rnn_kernel.h) is offered: Kernel::kGrid times it beside the others up to
  // kMaxBatch sequences and runs every larger batch on it (a block a group of sequences).
  bool has_one_block_registers() const { return block_reg_; }
  // The lanes a unit it is offered with (kFusedBlockRegLanes compiled for this cell and H).
  std::vector<int> one_block_register_lanes() const;
  // Runs it with `lanes` (kFusedBlockRegLanes) lanes a unit and `per_block` sequences a block
  // (1 .. lanes; 0: lanes), pinned (tests). Kernel::kGrid times both 1 and `lanes` a block.
  absl::Status ForwardOneBlockRegisters(const RecurrentIO& io, int lanes, int per_block = 0);
  // The register kernel's units a block offered (empty: not offered), fewest first; kRegisters
  // runs the first.
  const std::vector<int>& register_units() const { return reg_units_; }
  // The register kernel's (units a block, groups) offered with groups > 1 (FusedRnnArgs::
  // groups: the batch split into groups of sequences on blocks of their own); the chooser
  // times them for batches of at least 2 sequences a group.
  const std::vector<std::pair<int, int>>& register_groups() const { return reg_groups_; }
  // Runs the register kernel with `units` units a block (in `groups` groups), pinned (tests);
  // `apart`: a bidirectional layer's directions one launch after the other even where they fit
  // in one.
  absl::Status ForwardRegisters(const RecurrentIO& io, int units, int groups = 1,
                                bool apart = false);
  bool has_batched() const { return !batched_shapes_.empty(); }
  // A launch of the batch-tiled kernel: its grid size a group of sequences, register tile (an
  // index into kBatchedTiles) and groups (FusedBatchedArgs::groups).
  struct BatchedShape {
    int blocks = 0;
    int tile = 0;
    int groups = 1;
  };
  // The shapes offered (empty: the kernel is not offered); Forward(io, Kernel::kBatched) times
  // them once per batch-size bucket (B up to kMaxBatch, then 16, 32, 64: GridKey) and runs the
  // fastest.
  const std::vector<BatchedShape>& batched_shapes() const { return batched_shapes_; }
  // The shape chosen for batches of B (its bucket), e.g. "g2b64t2x8" (2 groups of 64 blocks,
  // tiles of 2 units x 8 sequences; "g4b32tf32x3_16x16": tensor-core tiles of 16 quads x 16
  // sequences, three TF32 products a product); "" before the first such batch.
  std::string BatchedKernelFor(int B) const;
  static std::string BatchedShapeName(const BatchedShape& shape);
  // What each shape took when they were timed for batches of B, e.g.
  // "g4b32t2x8:1.05,g4b32tf32x3_16x16:0.93" (ms); "" before the first such batch.
  std::string BatchedTimingsFor(int B) const;
  // The kernel Kernel::kGrid chose for batches of B: "grid66" (the grid kernel on 66 blocks),
  // "reg4" (the register kernel, 4 units a block), "reg8x2" (in 2 groups) or "one_block"; ""
  // before the first such batch.
  std::string GridKernelFor(int B) const;
  // What each kernel Kernel::kGrid timed for batches of B took, e.g.
  // "grid64:0.141,one_block:0.09,reg2:0.113" (ms); "" before the first such batch.
  std::string GridTimingsFor(int B) const;
  // Whether Forward runs batches of B on some kernel: up to kMaxBatch where has_grid(), up to
  // kMaxBatchedBatch where has_batched(), any where has_one_block_registers(); and the kernel
  // it takes for them (kGrid up to kMaxBatch, then kBatched where it can, else kGrid). For
  // callers that use FusedRnn alone (GRU reset_after=False).
  bool Takes(int B) const;
  Kernel KernelTaking(int B) const;
  // Forward on KernelTaking's kernel, except where both the grid kernels and the batch-tiled
  // kernel take the batch (B up to kMaxBatch): there on the faster of the two, timed once per
  // batch-size bucket (GridKey) after each has chosen its own fastest (not while the stream is
  // capturing a graph: then KernelTaking's). How the engine's model runs a layer that cuDNN
  // cannot run.
  absl::Status ForwardFastest(const RecurrentIO& io);
  // The kernel ForwardFastest runs batches of B on (KernelTaking's before it has timed them).
  Kernel FastestKernelFor(int B) const;
  // Runs the batch-tiled kernel in one shape, pinned (tests).
  absl::Status ForwardBatched(const RecurrentIO& io, BatchedShape shape);
  // Stops offering the cluster kernel (after it failed on this device).
  void DropCluster() { clusters_.clear(); }
  // The cluster kernels offered (FP32: the FMA kernel of the largest cluster that runs only).
  std::vector<FusedRnnClusterShape> cluster_shapes() const;
  // The cluster kernel chosen for batches of B, e.g. "mma16" (tensor cores, 16 blocks) or
  // "fma8"; "" before the first such batch.
  std::string ClusterKernelFor(int B) const;
  // Runs cluster_shapes()[index], pinned (tests).
  absl::Status ForwardCluster(const RecurrentIO& io, int index);
  // Stops offering the batch-tiled kernel (after it failed on this device).
  void DropBatched() { batched_shapes_.clear(); }
  // Whether this layer and `upper`, the next layer of a stack (its input is this layer's
  // sequence), run in one launch of the stacked register kernel (fused_rnn_kernel.h:
  // FusedRnnStackArgs): R in the same precision in both (exact FP32, or BF16 / FP16 weights),
  // one forward direction, the same cell (LSTM, GRU reset_after, or GRU reset_after=False in
  // exact FP32) and width H (one the kernel is compiled for), upper's input size H, and a grid
  // of two layers' blocks fits on the device at once.
  bool Stacks(const FusedRnn& upper) const;
  // The most layers (up to kFusedStackMaxLayers) whose blocks fit on the device at once with
  // this layer at the bottom (0: no stacked kernel), and the units a block offered for a stack of
  // `layers` (4 and 8 where they fit); the chooser times them.
  int max_stack_layers() const;
  std::vector<int> stack_units(int layers = 2) const;
  // A layer above this one in a stack and its batch (x is the sequence of the layer below; the
  // same batch and lengths).
  struct StackLayer {
    FusedRnn* rnn = nullptr;
    RecurrentIO io;
  };
  // Runs this layer (io) and `uppers` (bottom first, each Stacks() on the one below, at most
  // max_stack_layers() in all) in one launch, batches up to kMaxBatch; units 0: the fastest of
  // stack_units() for the batch size and layers (timed on the first such batch), else pinned
  // (tests). Enqueues only, except while timing.
  absl::Status ForwardStack(const RecurrentIO& io, const std::vector<StackLayer>& uppers,
                            int units = 0);
  absl::Status ForwardStack(const RecurrentIO& io, FusedRnn& upper, const RecurrentIO& upper_io,
                            int units = 0) {
    return ForwardStack(io, {{&upper, upper_io}}, units);
  }
  // The stacked kernel's units a block chosen for stacks of `layers` at batches of B, e.g.
  // "u8"; "" before the first.
  std::string StackKernelFor(int B, int layers = 2) const;
  // Runs `layers`, a chain of layers that cuDNN cannot run (bottom first; each one's x the y of
  // the one below, the same batch and lengths), as CudnnRecurrent::ForwardStack does theirs:
  // runs of layers that stack (StackRuns) in one launch of the stacked kernel, or every layer
  // on ForwardFastest, whichever timed faster for the batch size and step bucket (the first
  // such batch, eagerly; a batch captured before then runs apart).
  static absl::Status ForwardChain(const std::vector<StackLayer>& layers);
  // ForwardChain's choice with this layer at the bottom for B sequences of T steps: "stacked
  // 2/u8" (runs of layers and the first one's units a block), "apart", or "" before the first.
  std::string ChainFor(int B, int T) const;
  // "B=3 T<=32 with the layers above: stacked 2/u8, ..." of every choice ForwardChain made with
  // this layer at the bottom; "" before the first.
  std::string ChainSummary() const;
  int64_t memory_bytes() const;
  // The device buffers a launch bakes into a captured graph; they move when a larger batch
  // grows them, so a graph key must include them.
  std::vector<const void*> buffers() const { return {xproj_.get(), hbuf_.get()}; }

 private:
  FusedRnn(FusedRnnCell cell, FusedRnnWeights weights, int I, int H, std::vector<int> grids,
           size_t smem, cudaStream_t stream)
      : cell_(cell),
        weights_(weights),
        G_(FusedRnnGates(cell)),
        I_(I),
        H_(H),
        grids_(std::move(grids)),
        smem_(smem),
        stream_(stream) {}
  // "fused LSTM" or "fused GRU", for messages.
  const char* name() const;
  // The cluster sizes that the device runs for H (none: no cluster kernel), and their shared
  // memory per block.
  absl::Status FindCluster();
  // The grid and register kernels' exchange words and the tag base they and the stacked kernel
  // share, zeroed.
  absl::Status PrepareExchange();
  // Creates the cuBLAS handle and uploads W, R (as weights_) and the biases of every direction.
  absl::Status Upload(const std::vector<RecurrentDirection>& dirs);
  // xproj = x . W^T, plus the biases unless the kernel adds them (add_bias false).
  absl::Status Project(const RecurrentIO& io, bool add_bias = true);
  FusedRnnArgs Args(const RecurrentIO& io) const;
  // Launch's `blocks` for the register kernel with `units` units a block, in `groups` groups:
  // negative, -(units + kRegGroupsCode * (groups - 1)).
  static constexpr int kRegGroupsCode = 16;  // > the most units a block
  static_assert(kFusedRegMaxThreads / 32 < kRegGroupsCode);
  static constexpr int RegistersLaunch(int units, int groups) {
    return -(units + kRegGroupsCode * (groups - 1));
  }
  // grid_by_batch_'s key for batches of B: B up to kMaxBatch, past it kMaxBatch times a power of
  // two (a batcher's many sizes share a timing).
  static int GridKey(int B);
  // Launch's `blocks` for the one-block register kernel with `lanes` lanes a unit and `per_block`
  // sequences a block (more blocks than a grid has).
  static constexpr int kBlockRegLaunch = 1 << 20;
  static constexpr int kBlockRegLanesCode = 16;  // > the most lanes a unit
  static_assert(kFusedBlockRegLanes[sizeof(kFusedBlockRegLanes) / sizeof(int) - 1] <
                kBlockRegLanesCode);
  static constexpr int BlockRegLaunch(int lanes, int per_block) {
    return kBlockRegLaunch + lanes + kBlockRegLanesCode * per_block;
  }
  // BlockRegLaunch's lanes and per_block back from a launch code past kBlockRegLaunch.
  static constexpr int BlockRegLanes(int blocks) {
    return (blocks - kBlockRegLaunch) % kBlockRegLanesCode;
  }
  static constexpr int BlockRegPerBlock(int blocks) {
    return (blocks - kBlockRegLaunch) / kBlockRegLanesCode;
  }
  // blocks > 0: the grid kernel on that many blocks (past kBlockRegLaunch: the one-block
  // register kernel); 0: the one-block kernel; < 0: the register kernel (RegistersLaunch), a
  // bidirectional layer's directions one launch after the other where `apart` or where they do
  // not fit at once (RegistersApart).
  absl::Status Launch(const RecurrentIO& io, int blocks, bool apart = false);
  // Offers the register kernel where it is compiled for H and fits on the device.
  absl::Status PrepareRegisters(int sms);
  // Offers the one-block kernel where the cell (LSTM, GRU reset_after), H and the shared memory
  // allow.
  absl::Status PrepareSmall(const RecurrentDirection& d, int smem_optin);
  absl::Status LaunchCluster(const RecurrentIO& io);
  absl::Status LaunchClusterOf(const RecurrentIO& io, int index);
  // The kernel for io's batch size among the grid, register and one-block kernels (as Launch's
  // `blocks`), or the batch-tiled kernel's shape: each timed once per batch-size bucket
  // (fused_rnn_choose.cc).
  absl::StatusOr<int> ChooseGrid(const RecurrentIO& io);
  absl::StatusOr<BatchedShape> ChooseBatched(const RecurrentIO& io);
  // The fastest of `candidates` run by `launch` (a warm-up, then the minimum of three timed
  // runs), or the first one, untimed, while the stream is being captured (*timed: false).
  // `times`, if given, receives each candidate's time (ms) in order.
  absl::StatusOr<int> Fastest(const std::vector<int>& candidates,
                              const std::function<absl::Status(int)>& launch, bool* timed,
                              std::vector<float>* times = nullptr);
  // GridKernelFor's name of Launch's `blocks`.
  static std::string GridKernelName(int blocks);
  // Offers the stacked register kernel (as the lower layer) where it is compiled and fits
  // (fused_rnn_stack.cc).
  absl::Status PrepareStack(int sms);
  absl::Status LaunchStack(const RecurrentIO& io, const std::vector<StackLayer>& uppers, int units);
  // The batch-tiled kernel (fused_rnn_batched.cc): offered where a plan for kMaxBatchedBatch
  // sequences fits in shared memory and on the device at once.
  absl::Status PrepareBatched(int sms, int smem_optin);

  const FusedRnnCell cell_;
  const FusedRnnWeights weights_;  // kFp32: every kernel; kBf16 / kFp16: not the grid kernels
  const int G_;                    // gates a unit: 4 (LSTM), 3 (GRU)
  // 2: a bidirectional layer (forward, then reverse), which only the batch-tiled and register
  // kernels run.
  int dirs_ = 1;
  // The register kernel's blocks an SM runs at once, by units a block; the device's SMs.
  std::map<int, int> reg_blocks_per_sm_;
  int sms_ = 0;
  // Whether the register kernel with `units` a block in `groups` runs a bidirectional layer's
  // directions one launch after the other: where the blocks of both do not fit at once.
  bool RegistersApart(int units, int groups) const {
    auto it = reg_blocks_per_sm_.find(units);
    return dirs_ == 2 && it != reg_blocks_per_sm_.end() &&
           it->second * sms_ < dirs_ * groups * (H_ / units);
  }
  const int I_, H_;
  // Grid sizes that split H evenly and fit on the device at once, largest first (none with half
  // weights: the grid kernel is not offered). Fewer blocks
  // make the per-step barrier cheaper and each block's share of the work larger; the fastest
  // is chosen per batch size by timing (the results do not depend on it: every gate's dot
  // product is summed by one warp in the same order whatever the grid).
  const std::vector<int> grids_;
  const size_t smem_;  // dynamic shared memory per block, for the smallest grid
  const cudaStream_t stream_;
  // The cluster kernels offered, each with its shared memory per block; empty when none is.
  struct ClusterKernel {
    FusedRnnClusterShape shape;
    size_t smem = 0;
  };
  std::vector<ClusterKernel> clusters_;
  std::map<int, int> cluster_by_batch_;  // the fastest (an index into clusters_), per batch size
  int small_max_batch_ = 0;              // the one-block kernel's largest batch (0: none)
  bool block_reg_ = false;               // the one-block register kernel is offered
  size_t small_smem_ = 0;
  int small_chunk_ = 1;                             // steps of input projection computed at once
  std::map<int, int> grid_by_batch_;                // as Launch's `blocks`
  std::map<int, std::string> grid_times_by_batch_;  // GridTimingsFor
  std::map<int, Kernel> fastest_by_batch_;          // ForwardFastest's timed choice
  std::vector<int> reg_units_;                      // the register kernel's units a block, offered
  std::vector<std::pair<int, int>> reg_groups_;     // its (units, groups > 1), offered
  size_t reg_smem_ = 0;
  // The batch-tiled kernel's shapes, largest grid first; each grid size divides H.
  std::vector<BatchedShape> batched_shapes_;
  size_t batched_smem_limit_ = 0;                      // shared memory its plans may use per block
  std::map<int, std::string> batched_times_by_batch_;  // BatchedTimingsFor
  // A TF32 layer: the projection in TF32, the batch-tiled kernel's TF32 tiles (kBatchedTiles'
  // mma 1) instead of the 3xTF32 ones (mma 3).
  bool tf32_ = false;
  std::map<int, BatchedShape> batched_by_batch_;  // the fastest shape, per GridKey
  // The stacked kernel's units a block offered, each with the most layers whose blocks fit.
  std::vector<std::pair<int, int>> stack_fit_;
  size_t stack_smem_ = 0;
  // Its fastest units a block, per batch size and layers.
  std::map<std::pair<int, int>, int> stack_by_batch_;
  // ForwardChain's choices with this layer at the bottom.
  StackChoices chain_by_batch_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer W_;      // W^T [I, dirs*G*H]
  DeviceBuffer R_;      // [dirs][G*H, H], FP32 or (weights_ kBf16 / kFp16) 16-bit
  DeviceBuffer bias_;   // [dirs*G*H] bW + bR (GRU: bW alone for the n gate)
  DeviceBuffer bRn_;    // [dirs][H] GRU: the n gate's bR
  DeviceBuffer xproj_;  // [B, T, dirs*G*H]
  DeviceBuffer hbuf_;   // batch-tiled kernel: hT [2, H, Bp], h exchange between steps
  // Grid and register kernels: tagged words of h, [2][FusedRnnXchgStride(kMaxBatch, H)] (GRU
  // reset_after=False: [4][...], r * h too), and their FusedRnnSync.
  DeviceBuffer xchg_;
  DeviceBuffer sync_;
  // The stacked kernel's words (its own: tags of this layer's FusedRnnSync only): a ring of h
  // [FusedRnnStackXchgBlocks][FusedRnnXchgStride(kMaxBatch, H)] for each layer of a stack (GRU
  // reset_after=False: r * h(t-1) after the ring), and the progress words of the blocks of each
  // layer past the first [kFusedStackMaxLayers - 1][H].
  DeviceBuffer stack_xchg_;
  DeviceBuffer stack_done_;
  DeviceBuffer Wt_;  // [I, 4H] W transposed, for the one-block kernel
  DeviceBuffer Rt_;  // [H, 4H] R transposed, for the one-block kernel
};

}  // namespace rnnserve::engine::cuda
