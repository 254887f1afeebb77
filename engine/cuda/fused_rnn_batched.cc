// FusedRnn's batch-tiled kernel (fused_rnn_batched_kernel.h): which grids it is offered on, and
// its launch.

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/fused_rnn_batched_kernel.h"

namespace rnnserve::engine::cuda {

absl::Status FusedRnn::PrepareBatched(int sms, int smem_optin) {
  // For each split of the batch into groups (1, 2, 4) of their own blocks: grid sizes a group
  // that divide H, the largest up to the group's share of the SMs (the most rows a step spread
  // over the most SMs) and the largest up to half of it (a cheaper grid barrier, twice the rows
  // a block); each with every register tile: the FMA tiles and the tensor-core tiles of
  // this layer's math (3xTF32 for FP32 layers, TF32 for TF32 layers). More groups put more rows of
  // R in a block and read less of h(t-1) a step. The chooser times them per batch size.
  std::vector<BatchedShape> shapes;
  for (int groups : {1, 2, 4}) {
    std::vector<int> grids;
    for (int limit = std::min(sms / groups, H_); limit >= 1 && grids.size() < 2;) {
      int blocks = limit;
      while (blocks > 1 && H_ % blocks != 0) --blocks;
      if (grids.empty() || blocks < grids.back()) grids.push_back(blocks);
      limit = blocks / 2;
    }
    // Each shape must fit the largest batch in shared memory and on the device at once; plans
    // for smaller batches may keep more chunks in flight, up to the device's limit.
    const int seqs = (kMaxBatchedBatch + groups - 1) / groups;
    for (int blocks : grids) {
      for (int tile = 0; tile < kBatchedTileCount; ++tile) {
        if (kBatchedTiles[tile].mma != 0 && kBatchedTiles[tile].mma != (tf32_ ? 1 : 3)) continue;
        const FusedBatchedPlan plan =
            PlanFusedBatched(seqs, H_, G_, blocks, tile, static_cast<size_t>(smem_optin));
        int per_sm = 0;
        if (plan.smem == 0 ||
            ConfigureFusedBatchedKernel(cell_, tile, static_cast<size_t>(smem_optin)) !=
                cudaSuccess ||
            MaxFusedBatchedBlocksPerSm(cell_, tile, plan.smem, &per_sm) != cudaSuccess ||
            per_sm * sms < blocks * groups) {
          cudaGetLastError();  // not offered; the error is not sticky
          continue;
        }
        shapes.push_back({.blocks = blocks, .tile = tile, .groups = groups});
      }
    }
  }
  batched_shapes_ = std::move(shapes);
  batched_smem_limit_ = static_cast<size_t>(smem_optin);
  return absl::OkStatus();
}

absl::Status FusedRnn::ForwardBatched(const RecurrentIO& io, BatchedShape shape) {
  if (io.B > kMaxBatchedBatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " (batch-tiled) takes batches of at most ", kMaxBatchedBatch, "; got ", io.B));
  }
  const int seqs = (io.B + shape.groups - 1) / shape.groups;
  const FusedBatchedPlan plan =
      PlanFusedBatched(seqs, H_, G_, shape.blocks, shape.tile, batched_smem_limit_);
  if (shape.groups < 1 || plan.smem == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": no batch-tiled plan for B=", io.B, ", H=", H_, " in ", shape.groups,
                     " groups of ", shape.blocks, " blocks, tile ", shape.tile));
  }
  // hT [dirs][groups][2][H][Bp]: h(t-1) and h(t), sequences innermost (GRU reset_after=False:
  // [3], r * h(t-1) too).
  RNNSERVE_RETURN_IF_ERROR(hbuf_.Reserve(int64_t{dirs_} * shape.groups * FusedBatchedSlots(cell_) *
                                         H_ * plan.Bp * static_cast<int64_t>(sizeof(float))));
  RNNSERVE_RETURN_IF_ERROR(Project(io, /*add_bias=*/false));
  FusedBatchedArgs args{.a = Args(io), .plan = plan, .dirs = dirs_, .groups = shape.groups};
  args.a.bias = bias_.as<float>();
  args.a.hbuf = hbuf_.as<float>();
  return CudaOk(LaunchFusedBatchedKernel(args, stream_),
                absl::StrCat("cudaLaunchCooperativeKernel (", name(), " batch-tiled)").c_str());
}

}  // namespace rnnserve::engine::cuda
