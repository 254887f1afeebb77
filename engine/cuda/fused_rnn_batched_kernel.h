#pragma once

// The batch-tiled persistent kernel of FusedRnn (fused_rnn.h; fused_rnn_batched_kernel.cu), for
// batches up to kBatchedMaxBatch: one cooperative grid of up to one block per SM; block k owns
// hidden units [k*U, (k+1)*U) and keeps the 4 gate rows of R of each (the GRU's 3 and a zero
// row) in shared memory for all steps, laid out k-major, Ws [H][U][4]. A step is a small GEMM
// per block, gates [U, 4, B] = Ws^T . h(t-1)^T, in which every weight read from shared memory
// serves 4 sequences and every h(t-1) value read serves the 4 gates of a unit:
//   - h(t-1) lives in global memory as hT [H][Bp] (Bp: B rounded up to 4, the padding zero),
//     double-buffered by step parity; the block streams it into shared memory in chunks of KC
//     columns (cp.async.cg: 16-byte copies that bypass L1, so they see the other blocks' stores
//     of the previous step), `bufs` chunks in flight, while it computes on earlier chunks;
//   - thread (ks, u, bg) of the first tiles * KS accumulates the 4 gates x 4 sequences
//     (bg*4 .. bg*4+3) of unit u over the columns ks, ks + KS, ... of each chunk in 16 FP32
//     registers with FMAs; the KS partial sums of each gate are added in ks order;
//   - one thread per (unit, sequence) applies the cell (fused_rnn_cell.cuh), keeps h and the
//     LSTM's c in registers for all steps, loads the next step's input projection before the
//     grid barrier, writes h(t) into the other hT buffer and y, and the grid synchronises.
// Steps past a sequence's length keep its h and c and write zero outputs, as the other fused
// kernels do.

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

// How a grid of `blocks` runs B sequences of H units; smem == 0 when it does not fit.
struct FusedBatchedPlan {
  int blocks = 0;
  int U = 0;       // hidden units a block
  int Bp = 0;      // B rounded up to a multiple of 4
  int tiles = 0;   // U * Bp / 4 register tiles (a unit's 4 gates x 4 sequences)
  int KS = 0;      // threads sharing a tile, each over its part of a chunk's columns
  int KC = 0;      // columns of h(t-1) a chunk
  int chunks = 0;  // H / KC
  int bufs = 0;    // chunk buffers in shared memory
  size_t smem = 0;
};

// Shared memory (floats): Ws [H][U][4], partial sums [KS][Bp][U][4], chunks [bufs][KC][Bp].
FusedBatchedPlan PlanFusedBatched(int B, int H, int blocks, size_t smem_limit);

struct FusedBatchedArgs {
  FusedRnnArgs a;  // hbuf: [2][H][Bp] (hT of each step parity); U unused
  FusedBatchedPlan plan;
};

cudaError_t ConfigureFusedBatchedKernel(FusedRnnCell cell, size_t smem);
cudaError_t MaxFusedBatchedBlocksPerSm(FusedRnnCell cell, size_t smem, int* blocks);
cudaError_t LaunchFusedBatchedKernel(const FusedBatchedArgs& args, cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
