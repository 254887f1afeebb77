// The shapes of FusedRnn's cluster kernel (fused_rnn_cluster.cuh) with R stored as bfloat16 or
// IEEE half. A half weight takes half the bytes of a float, so a lane holds a row's 4-column
// chunk in 2 registers instead of 4, and rows that spill to shared memory in FP32 stay in
// registers; most shapes are also compiled over a cluster of half the blocks, twice the rows a
// warp, which FusedRnn times against the larger cluster per batch size (a smaller cluster
// synchronises faster; a larger one computes fewer rows a block).
//
// LSTM (512 threads, at most 128 registers a thread): H=512 over 16 blocks, all 8 rows of a
// warp in registers (64 registers); over 8 blocks, 6 of 16 in registers and 10 in shared
// memory (160 KiB). H=256 over 16 and 8, H=128 over 8 and 4: all rows in registers.
// GRU (384 threads, at most 168 registers a thread): H=512 over 16 only (over 8, a block's
// 8 x 64 cells would outnumber its threads), all 8 rows in registers. H=256 over 16 and 8,
// H=128 over 8 and 4: all in registers.

#include <array>

#include "engine/cuda/fused_rnn_cluster.cuh"

namespace rnnserve::engine::cuda {
namespace {

constexpr FusedRnnCell kLstm = FusedRnnCell::kLstm, kGru = FusedRnnCell::kGru;

// Largest cluster first for each (cell, H), as FusedRnnClusterSizes lists them.
template <FusedRnnWeights kW>
constexpr std::array<FusedRnnClusterVariant, 11> Shapes() {
  return {MakeClusterVariant<kLstm, 512, 16, 8, kW>(), MakeClusterVariant<kLstm, 512, 8, 6, kW>(),
          MakeClusterVariant<kLstm, 256, 16, 4, kW>(), MakeClusterVariant<kLstm, 256, 8, 8, kW>(),
          MakeClusterVariant<kLstm, 128, 8, 4, kW>(),  MakeClusterVariant<kLstm, 128, 4, 8, kW>(),
          MakeClusterVariant<kGru, 512, 16, 8, kW>(),  MakeClusterVariant<kGru, 256, 16, 4, kW>(),
          MakeClusterVariant<kGru, 256, 8, 8, kW>(),   MakeClusterVariant<kGru, 128, 8, 4, kW>(),
          MakeClusterVariant<kGru, 128, 4, 8, kW>()};
}

constexpr auto kBf16Shapes = Shapes<FusedRnnWeights::kBf16>();
constexpr auto kFp16Shapes = Shapes<FusedRnnWeights::kFp16>();

}  // namespace

const FusedRnnClusterVariant* FusedRnnClusterHalfVariants(FusedRnnWeights weights, int* count) {
  *count = 0;
  if (weights == FusedRnnWeights::kFp32) return nullptr;
  const auto& shapes = weights == FusedRnnWeights::kBf16 ? kBf16Shapes : kFp16Shapes;
  *count = static_cast<int>(shapes.size());
  return shapes.data();
}

}  // namespace rnnserve::engine::cuda
