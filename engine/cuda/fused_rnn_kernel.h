#pragma once

// Launchers of FusedRnn's recurrent kernels (plain C++ header): the cooperative grid kernel
// (fused_rnn_kernel.cu), the thread-block-cluster kernel (fused_rnn_cluster_kernel.cu) and the
// one-block kernel (fused_rnn_small_kernel.cu).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rnnserve::engine::cuda {

// The cells the kernels compute, gates in the IR's order: LSTM i,f,g,o; GRU r,z,n with the
// reset gate applied after the recurrent matmul (reset_after, cuDNN's and PyTorch's GRU), or
// before it (kGruBefore: reset_after=False, Keras 2's GRU before TF 2, ONNX's
// linear_before_reset=0; the register kernel only).
enum class FusedRnnCell { kLstm, kGru, kGruBefore };

inline constexpr int FusedRnnGates(FusedRnnCell cell) {
  return cell == FusedRnnCell::kLstm ? 4 : 3;
}

// How the recurrent weights R are stored on the device. kFp32: exact FP32 (every kernel).
// kBf16 / kFp16: R rounded once to bfloat16 / IEEE half (the cluster kernel only), for layers
// compiled in those math modes; the kernel widens each weight to FP32 and computes everything
// else (input projection, h, c, gates, sums) in FP32 as for kFp32.
enum class FusedRnnWeights { kFp32, kBf16, kFp16 };

// The grid kernel exchanges h(t) between its blocks as 64-bit words in global memory, the
// float in the low half and a tag in the high half, [2][B][H] by step parity: step s reads the
// words tagged base + s + 1 and writes base + s + 2. `base` lives in device memory beside an
// exit counter; the last block to finish a launch moves it past every tag of that launch, so
// that a launch (or a graph replayed) never takes a word of an earlier one for its own. Both
// must be zero (or the words of an earlier launch) before the first launch.
struct FusedRnnSync {
  unsigned base = 0;
  unsigned exits = 0;
};
// [B][H] word blocks of the exchange: h by step parity, and for GRU reset_after=False (the
// register kernel) r * h(t-1) by step parity too.
constexpr int FusedRnnXchgParts(FusedRnnCell cell) {
  return cell == FusedRnnCell::kGruBefore ? 4 : 2;
}
// Words from one parity's [B][H] to the other's: even, so that pairs of words are 16-byte
// aligned in both.
inline constexpr int FusedRnnXchgStride(int B, int H) { return (B * H + 1) / 2 * 2; }

struct FusedRnnArgs {
  FusedRnnCell cell = FusedRnnCell::kLstm;
  // [B, T, G*H] input projection with biases: bW + bR for every gate but the GRU's n, which
  // has bW only (its bR is bRn, inside r * (...)). Where `bias` is set, without them: the
  // kernel (the batch-tiled one) adds bias [G*H] itself, in the same single rounding.
  const float* xproj = nullptr;
  const float* bias = nullptr;
  FusedRnnWeights weights = FusedRnnWeights::kFp32;
  const float* R = nullptr;            // [G*H, H] (kFp32)
  const uint16_t* R16 = nullptr;       // [G*H, H] bfloat16 or half bits (kBf16, kFp16)
  const float* bRn = nullptr;          // [H] GRU: the n gate's recurrent bias; LSTM: null
  const int32_t* lengths = nullptr;    // [B], each in [1, T]
  const float* h0 = nullptr;           // [B, H] or null
  const float* c0 = nullptr;           // [B, H] or null; LSTM only
  float* hbuf = nullptr;               // batch-tiled kernel: its hT scratch
  unsigned long long* xchg = nullptr;  // grid kernels: [2][FusedRnnXchgStride] tagged words
  FusedRnnSync* sync = nullptr;        // grid kernel: its tags' base (above)
  float* y = nullptr;                  // [B, T, H] or null; zero past each length
  float* hy = nullptr;                 // [B, H]
  float* cy = nullptr;                 // [B, H] or null; LSTM only
  int B = 0, T = 0, H = 0;
  int U = 0;  // hidden units per block (grid and register kernels)
  // Register kernel: the batch split into `groups` of ceil(B / groups) sequences, each on its
  // own H / U blocks with its own exchange words ([parities][xchg_stride] a group, xchg_stride
  // for a group's sequences), as many blocks an SM as groups: a group's warps take half or a
  // quarter of the sequences one after another.
  int groups = 1;
  // Register kernel: 2 for both directions of a bidirectional layer, each on blocks of its own
  // (the forward direction's first), with exchange words of their own after the forward
  // direction's; then R is [dirs][G*H][H], bRn [dirs][H], the states [dirs][B][H], and the rows
  // of xproj and y hold every direction's columns ([B, T, dirs*G*H], [B, T, dirs*H]).
  // NarrowFusedDirection points a direction's blocks at theirs; `reverse` (its second
  // direction) runs each sequence from its last valid step, and writes step s's output at time
  // len - 1 - s. only_dir >= 0: the launch runs that direction alone (where both directions'
  // blocks do not fit on the device at once, one launch after the other).
  int dirs = 1;
  int only_dir = -1;
  bool reverse = false;
  int steps = 0;        // the longest length
  int xchg_stride = 0;  // grid kernels: FusedRnnXchgStride(B, H)
  // One-block register kernel: sequences a block, 1 .. its lanes a unit (0: as many as lanes).
  int seqs_per_block = 0;
};

// The grid kernel's threads per block, and the (unit, sequence) cells each keeps at most in
// registers: U * B <= kFusedGridCells * kFusedGridThreads.
inline constexpr int kFusedGridThreads = 256;
inline constexpr int kFusedGridCells = 4;

// Shared memory the grid kernel needs per block, in bytes: R's rows of the block's U units
// [G*U, H], h(t-1) [B, H] and the gates' dot products [B, G*U].
inline size_t FusedRnnSmemBytes(FusedRnnCell cell, int B, int H, int U) {
  const size_t G = FusedRnnGates(cell);
  return sizeof(float) * (G * U * H + static_cast<size_t>(B) * H + B * G * U);
}

cudaError_t ConfigureFusedRnnKernel(FusedRnnCell cell, int H, size_t smem);
cudaError_t MaxFusedRnnBlocksPerSm(FusedRnnCell cell, int H, size_t smem, int* blocks);
// args.U = H / blocks; args.xchg and args.sync set.
cudaError_t LaunchFusedRnnKernel(const FusedRnnArgs& args, int blocks, size_t smem,
                                 cudaStream_t stream);

// The register kernel (fused_rnn_reg_kernel.cu): the grid kernel's exchange, with U warps a
// block, warp w owning unit k*U + w and holding its G rows of R in registers (compiled for
// H = 128, 256, 512 and 1024 only; R in FP32, or in BF16 / FP16 as args.weights says); h(t-1) is
// gathered into shared memory [2][B][H] by step parity, and the warp that sums a unit's gates
// applies its cell (lane b: sequence b). kGruBefore exchanges r * h(t-1) too, a second round
// trip a step: xchg then holds [4][FusedRnnXchgStride] words (h by parity, then r * h by parity)
// and shared memory [3][B][H].
// args.groups > 1 splits the batch, each group on its own H / U blocks with its own
// [2 or 4][xchg_stride] words (xchg_stride for ceil(B / groups) sequences); args.dirs = 2 runs
// both directions of a bidirectional layer, each on its own groups' blocks and words (the
// forward direction's first).
// Launch: `blocks` = H / U blocks a group and direction (all, or args.only_dir) of 32 * U threads,
// U <= kFusedRegMaxThreads / 32, B <= 32.
inline constexpr int kFusedRegMaxThreads = 256;
bool FusedRnnRegCompiled(int H);
inline size_t FusedRnnRegSmemBytes(FusedRnnCell cell, int B, int H) {
  return sizeof(float) * (cell == FusedRnnCell::kGruBefore ? 3 : 2) * static_cast<size_t>(B) * H;
}
cudaError_t ConfigureFusedRnnRegKernel(FusedRnnCell cell, int H, FusedRnnWeights weights,
                                       size_t smem);
cudaError_t MaxFusedRnnRegBlocksPerSm(FusedRnnCell cell, int H, FusedRnnWeights weights, int U,
                                      size_t smem, int* blocks);
cudaError_t LaunchFusedRnnRegKernel(const FusedRnnArgs& args, int blocks, size_t smem,
                                    cudaStream_t stream);

// The register kernel over 2 to kFusedStackMaxLayers stacked layers of one forward direction in
// one launch (the layer wavefront: layer l + 1's step t runs beside layer l's step t + 1), R in
// FP32 or in BF16 / FP16 as args.weights says (the W of layers past the first in FP32, as the
// input projection's), the same cell and width H in every layer and each layer's input the
// sequence of the one below (I = H): blocks [l * H / U, (l + 1) * H / U) run layer l, layer 0 as
// the register kernel does (a[0].xproj its input projection), the others with their warps
// holding their unit's G rows of W (in) beside those of R and computing x(t) . W[r] + bias from
// the lower layer's h(t) in the kernel. Each layer's h goes through a ring of kFusedStackRing
// [B][H] word blocks (h(t) in block (t + 1) % ring, h0 in block 0) instead of two by parity, so
// that a layer runs up to ring - 1 steps ahead of the one above; before overwriting a block a
// layer waits for every block of the layer above to have gathered what the block held (`done`:
// the tag of the last step each such block gathered). GRU reset_after=False: each layer's
// r * h(t-1) by step parity in two more word blocks after its ring, exchanged as the register
// kernel does. One FusedRnnSync (a[0].sync) for the launch.
inline constexpr int kFusedStackRing = 8;
inline constexpr int kFusedStackMaxLayers = 4;
// [xchg_stride] word blocks of a layer's exchange: its ring, then r * h(t-1) by parity.
constexpr int FusedRnnStackXchgBlocks(FusedRnnCell cell) {
  return kFusedStackRing + (cell == FusedRnnCell::kGruBefore ? 2 : 0);
}
struct FusedRnnStackArgs {
  // Each layer's FusedRnnArgs (B, T, H, U, steps, lengths and xchg_stride equal in all): a[l].xchg
  // its [FusedRnnStackXchgBlocks][xchg_stride] words; a[l].xproj, l >= 1, unused.
  FusedRnnArgs a[kFusedStackMaxLayers];
  const float* W[kFusedStackMaxLayers] = {};     // layer l >= 1: input weights W^T [H, G*H]
  const float* bias[kFusedStackMaxLayers] = {};  // layer l >= 1: biases [G*H], folded as xproj's
  unsigned* done = nullptr;  // [layers - 1][H / U]: one word a block of each layer l >= 1
  int layers = 2;
};
// Compiled for H = 128, 256, 512, LSTM and GRU, each weights (GRU reset_after=False: exact FP32
// only). Shared memory: h(t-1) by parity, for layers past the first the lower layer's h(t) by
// parity, and for GRU reset_after=False r * h(t-1).
bool FusedRnnStackCompiled(FusedRnnCell cell, int H, FusedRnnWeights weights);
inline size_t FusedRnnStackSmemBytes(FusedRnnCell cell, int B, int H) {
  return sizeof(float) * (cell == FusedRnnCell::kGruBefore ? 5 : 4) * static_cast<size_t>(B) * H;
}
cudaError_t ConfigureFusedRnnStackKernel(FusedRnnCell cell, int H, FusedRnnWeights weights,
                                         size_t smem);
cudaError_t MaxFusedRnnStackBlocksPerSm(FusedRnnCell cell, int H, FusedRnnWeights weights, int U,
                                        size_t smem, int* blocks);
// layers * H / U blocks of 32 * U threads.
cudaError_t LaunchFusedRnnStackKernel(const FusedRnnStackArgs& args, size_t smem,
                                      cudaStream_t stream);

// The cluster kernel: one cluster of `cluster` blocks of 128 * G threads (16 warps for the
// LSTM, 12 for the GRU), R and h in the blocks' shared memory (and registers), h exchanged
// through distributed shared memory. It is compiled for a few (cell, H, cluster, weights)
// shapes only, batches of at most kClusterMaxBatch. With half weights a tensor-core variant
// (mma.sync, the batch as the MMA's N) is compiled beside the FMA one.
inline constexpr int kClusterMaxBatch = 8;

// A compiled cluster kernel: its blocks, and whether it is the tensor-core kernel
// (fused_rnn_cluster_mma_kernel.cu, half weights only) or the FMA one.
struct FusedRnnClusterShape {
  int cluster = 0;
  bool mma = false;
};
// The shapes compiled for the cell, hidden size H and weight storage: FMA kernels largest
// cluster first, then tensor-core kernels likewise; empty when none.
std::vector<FusedRnnClusterShape> FusedRnnClusterShapes(FusedRnnCell cell, int H,
                                                        FusedRnnWeights weights);
// Dynamic shared memory per block for batches up to B, in bytes.
size_t FusedRnnClusterSmemBytes(FusedRnnCell cell, int B, int H, FusedRnnClusterShape shape,
                                FusedRnnWeights weights);
// Sets the kernel's shared-memory limit and, past 8 blocks, allows the non-portable size.
cudaError_t ConfigureFusedRnnClusterKernel(FusedRnnCell cell, int H, FusedRnnClusterShape shape,
                                           FusedRnnWeights weights, size_t smem);
// How many such clusters the device can run at once (0: it cannot run one).
cudaError_t MaxActiveFusedRnnClusters(FusedRnnCell cell, int H, FusedRnnClusterShape shape,
                                      FusedRnnWeights weights, size_t smem, int* clusters);
// Runs the kernel of (args.cell, args.H, shape, args.weights).
cudaError_t LaunchFusedRnnClusterKernel(const FusedRnnArgs& args, FusedRnnClusterShape shape,
                                        size_t smem, cudaStream_t stream);

// The one-block kernel for small H (LSTM, GRU reset_after): the whole layer in one block with
// no grid barrier and no separate input projection. W^T [I][G*H], R^T [H][G*H] and the bias
// live in shared memory for all steps, h and c too; bias + x(t) . W[r] of `chunk` steps at a
// time is computed by all threads ahead of those steps, then each step adds h(t-1) . R[r]
// (FP32 FMAs) and costs two block barriers. Uses x (not FusedRnnArgs' xproj); hbuf and U are
// unused.
struct FusedRnnSmallArgs {
  FusedRnnArgs a;
  const float* x = nullptr;     // [B, T, I]
  const float* Wt = nullptr;    // [I, G*H]
  const float* Rt = nullptr;    // [H, G*H]
  const float* bias = nullptr;  // [G*H] (as FusedRnnArgs.xproj's)
  int I = 0;
  int chunk = 1;  // steps whose input projection is computed at once
};
// Whether the one-block kernel keeps R's gate rows in its threads' registers (H = 32, 64)
// rather than in shared memory.
inline bool FusedRnnSmallRegisterRows(int H) { return H == 32 || H == 64; }
// Shared memory of the one-block kernel for batches up to B, in bytes; its threads.
size_t FusedRnnSmallSmemBytes(FusedRnnCell cell, int B, int I, int H, int chunk);
int FusedRnnSmallThreads(int B, int H);
cudaError_t ConfigureFusedRnnSmallKernel(FusedRnnCell cell, int H, size_t smem);
cudaError_t LaunchFusedRnnSmallKernel(const FusedRnnSmallArgs& args, size_t smem,
                                      cudaStream_t stream);

// The one-block register kernel for H up to kFusedBlockRegMaxHidden (LSTM, GRU reset_after True
// or False; exact FP32): a group of up to `lanes` sequences a block (FusedRnnArgs::
// seqs_per_block: fewer put the batch on more SMs, each block's step as short as a lone
// sequence's), the whole layer in that block,
// `lanes` (1, 2, 4 or 8) threads a hidden unit (H rounded up to 32 or 64) each keeping its share
// of the unit's rows of R in registers; a step is the lanes' partial dot products with h(t-1)
// from shared memory, log2(lanes) shuffles, the cell, and one block barrier (two for
// reset_after=False). Its blocks never wait on each other: any batch size, in as many blocks
// as it takes (an ordinary launch, as a programmatic dependent of the kernel before it: its
// prologue overlaps that kernel, and it waits for it before reading xproj). Reads
// FusedRnnArgs' xproj (the input projection, computed before it); xchg, sync, hbuf, U and
// groups are unused.
inline constexpr int kFusedBlockRegMaxHidden = 64;
inline constexpr int kFusedBlockRegLanes[] = {1, 2, 4, 8};
// Whether it is compiled for (cell, H, lanes): a lane keeps at most 128 weights of R, so one lane
// a unit only up to 32 units.
bool FusedRnnBlockRegCompiled(FusedRnnCell cell, int H, int lanes);
// FusedRnn's input projection where it is small (its own launch costs more than its arithmetic):
// out [rows, N] = x [rows, I] . Wt [I, N] (+ bias [N] where not null), one kernel, a thread four
// rows of an output column, FP32 FMAs (cuBLAS plus a bias kernel are two launches and ~10 us
// more at these sizes). It lets a programmatic dependent launched after it start at once.
cudaError_t LaunchFusedRnnSmallProjection(const float* x, const float* Wt, const float* bias,
                                          float* out, int64_t rows, int I, int N,
                                          cudaStream_t stream);
// The most FMAs (rows * I * N) FusedRnn projects with it rather than cuBLAS (at 2^26, B = 1
// T = 100 H = 256, 26 M FMAs, ran 6-13 us slower than cuBLAS on an H100).
inline constexpr int64_t kFusedSmallProjectionFmas = int64_t{1} << 24;
cudaError_t LaunchFusedRnnBlockRegKernel(const FusedRnnArgs& args, int lanes, cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
