#pragma once

// The batch-tiled persistent kernel of FusedRnn (fused_rnn.h; fused_rnn_batched_kernel.cu), for
// batches up to kBatchedMaxBatch: one cooperative grid of up to one block per SM; block k owns
// hidden units [k*U, (k+1)*U) and keeps their G*U gate rows of R (unit-major: row u*G + q is
// gate q of unit u) in shared memory for all steps, laid out k-major in quads of 4 rows,
// Ws [H][Q][4] (Q = ceil(G*U / 4); rows padded to WS quads), so that the GRU's 3 gates take no
// more arithmetic than they need. A step is a small GEMM per block, gates [G*U, B] = Ws^T .
// h(t-1)^T, register-tiled:
//   - h(t-1) lives in global memory as hT [H][Bp] (Bp: B rounded up to the tile's sequences,
//     the padding zero), double-buffered by step parity; the block streams it into shared
//     memory in chunks of KC columns (cp.async.cg: 16-byte copies that bypass L1, so they see
//     the other blocks' stores of the previous step), `bufs` chunks in flight, while it computes
//     on earlier chunks;
//   - a register tile is TU quads x TB sequences (kBatchedTiles: 1 x 4, or 2 x 8, which reads
//     half the shared memory per FMA); thread (ks, tile) of the first tiles * KS accumulates its
//     tile over the columns ks, ks + KS, ... of each chunk with FP32 FMAs, and the KS partial
//     sums of each gate are added in ks order (in shared memory that the chunk buffers free at
//     the end of the step);
//   - or, with tensor cores (tiles with mma > 0), each warp takes a tile of whole 16-row
//     M-tiles x 8-sequence N-tiles and its part of a chunk's columns, 8 at a time, with
//     mma.sync m16n8k8 TF32 and FP32 accumulators: mma = 1 truncates R and h(t-1) to TF32 (for
//     TF32 layers, as cuDNN's and PyTorch's TF32 modes); mma = 3 keeps FP32 accuracy with three
//     TF32 products a product (tf32_mma.cuh: ~2^-21 of each product left out, where FP32 FMAs
//     round at 2^-24). The chunk rows are
//     padded (BS) and Ws's rows sized (WS) so that a warp's fragment loads hit 32 banks;
//   - one thread per (unit, sequence) applies the cell (fused_rnn_cell.cuh), keeps h and the
//     LSTM's c in registers for all steps, loads the next step's input projection at the start
//     of the step, writes h(t) into the other hT buffer and y, and the grid synchronises.
// Steps past a sequence's length keep its h and c and write zero outputs, as the other fused
// kernels do. The tiles and the grid sizes give the same sums in different orders of partial
// sums; FusedRnn times them per batch size.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {

inline constexpr int kBatchedMaxBatch = 64;
inline constexpr int kBatchedThreads = 256;
// (unit, sequence) cells a thread keeps: U * B <= kBatchedMaxCells * kBatchedThreads.
inline constexpr int kBatchedMaxCells = 4;
// Chunk buffers of h(t-1) a block may keep in flight.
inline constexpr int kBatchedMaxBufs = 8;

// The register tiles compiled: quads of gate rows x sequences a thread (mma 0: FP32 FMAs) or a
// warp (mma 1: TF32 tensor cores, mma 3: three TF32 products a product, FP32 accuracy)
// accumulates; a warp's tile is whole M-tiles of 16 rows (4 quads) by N-tiles of 8 sequences.
struct FusedBatchedTile {
  int units, seqs, mma;
};
inline constexpr FusedBatchedTile kBatchedTiles[] = {
    {1, 4, 0},  {2, 8, 0},   {16, 16, 3}, {12, 16, 3}, {8, 32, 3},
    {4, 32, 3}, {16, 16, 1}, {12, 16, 1}, {8, 32, 1},  {4, 32, 1}};
inline constexpr int kBatchedTileCount = sizeof(kBatchedTiles) / sizeof(kBatchedTiles[0]);
inline constexpr int kBatchedWarps = kBatchedThreads / 32;

// How a grid of `blocks` runs B sequences of H units of `gates` gates (4: LSTM, 3: GRU) with
// tile kBatchedTiles[tile]; smem == 0 when it does not fit.
struct FusedBatchedPlan {
  int blocks = 0;
  int tile = 0;    // index into kBatchedTiles
  int U = 0;       // hidden units a block
  int Q = 0;       // quads of gate rows a block, ceil(gates * U / 4) (tensor cores: rounded up to
                   // the tile's, the rows past gates * U zero)
  int Bp = 0;      // B rounded up to a multiple of the tile's sequences
  int BS = 0;      // floats a column of a chunk in shared memory (Bp; padded for tensor cores)
  int tiles = 0;   // (Q / units) * (Bp / seqs) register tiles
  int KS = 0;      // threads (tensor cores: warps) sharing a tile, each over its part of a chunk's
                   // columns
  int KC = 0;      // columns of h(t-1) a chunk
  int chunks = 0;  // H / KC
  int bufs = 0;    // chunk buffers in shared memory
  int WS = 0;      // float4s a row of Ws, Q or more (padding that spreads a warp's loads)
  int RQ = 0;      // float4s a row of the partial sums, Q or more (padding, as WS)
  size_t smem = 0;
};

// Shared memory (floats): Ws [H][WS][4], the biases [4][U], then the chunks [bufs][KC][BS],
// whose space the partial sums [KS][Bp][RQ][4] take over at the end of each step (the larger of
// the two).
FusedBatchedPlan PlanFusedBatched(int B, int H, int gates, int blocks, int tile, size_t smem_limit);

// dirs = 2 runs both directions of a bidirectional layer in one launch, plan.blocks blocks each
// (the second direction from each sequence's last valid step back): a's R [dirs][G*H][H], bRn
// [dirs][H], h0, c0, hy, cy [dirs][B][H]; xproj [B][T][dirs*G*H] and y [B][T][dirs*H] hold the
// directions side by side. xproj comes without the biases: a.bias [dirs][G*H] is required.
// groups > 1 splits the batch too: group g of a direction runs sequences [g*S, (g+1)*S),
// S = ceil(B / groups), on its own plan.blocks blocks (plan made for S sequences), each block
// holding U = H / plan.blocks units' rows of R for S sequences instead of
// H / (groups * plan.blocks) units' for all B: as much arithmetic a block, 1/groups of h(t-1)
// to read from L2 a step. hbuf: [dirs][groups][2][H][Bp].
// hT buffers a part: h by step parity, and for GRU reset_after=False r * h(t-1) too.
constexpr int FusedBatchedSlots(FusedRnnCell cell) {
  return cell == FusedRnnCell::kGruBefore ? 3 : 2;
}

struct FusedBatchedArgs {
  FusedRnnArgs a;  // hbuf: [2][H][Bp] (hT of each step parity) a part; U unused
  FusedBatchedPlan plan;
  int dirs = 1;
  int groups = 1;
};

cudaError_t ConfigureFusedBatchedKernel(FusedRnnCell cell, int tile, size_t smem);
cudaError_t MaxFusedBatchedBlocksPerSm(FusedRnnCell cell, int tile, size_t smem, int* blocks);
cudaError_t LaunchFusedBatchedKernel(const FusedBatchedArgs& args, cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
