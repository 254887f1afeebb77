// FusedRnn's batch-tiled kernel (fused_rnn_batched_kernel.h): which grids it is offered on, and
// its launch.

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/fused_rnn_batched_kernel.h"

namespace rnnserve::engine::cuda {

absl::Status FusedRnn::PrepareBatched(int sms, int smem_optin) {
  // Grid sizes that divide H: the largest up to one block per SM (the most rows a step spread
  // over the most SMs), and the largest up to half of it (a cheaper grid barrier, twice the
  // rows a block), for the chooser to time per batch size.
  std::vector<int> grids;
  for (int limit = std::min(sms, H_); limit >= 1 && grids.size() < 2;) {
    int blocks = limit;
    while (blocks > 1 && H_ % blocks != 0) --blocks;
    if (grids.empty() || blocks < grids.back()) grids.push_back(blocks);
    limit = blocks / 2;
  }
  // Each grid size must fit the largest batch in shared memory and on the device at once.
  size_t smem = 0;
  std::vector<int> fitting;
  for (int blocks : grids) {
    const FusedBatchedPlan plan =
        PlanFusedBatched(kMaxBatchedBatch, H_, blocks, static_cast<size_t>(smem_optin));
    if (plan.smem == 0) continue;
    fitting.push_back(blocks);
    smem = std::max(smem, plan.smem);
  }
  if (fitting.empty()) return absl::OkStatus();
  // Plans for smaller batches may keep more chunks in flight: up to the device's limit.
  if (ConfigureFusedBatchedKernel(cell_, static_cast<size_t>(smem_optin)) != cudaSuccess) {
    cudaGetLastError();  // not offered; the error is not sticky
    return absl::OkStatus();
  }
  int per_sm = 0;
  if (MaxFusedBatchedBlocksPerSm(cell_, smem, &per_sm) != cudaSuccess) {
    cudaGetLastError();
    return absl::OkStatus();
  }
  std::erase_if(fitting, [&](int blocks) { return blocks > per_sm * sms; });
  batched_grids_ = std::move(fitting);
  batched_smem_limit_ = static_cast<size_t>(smem_optin);
  return absl::OkStatus();
}

absl::Status FusedRnn::LaunchBatched(const RecurrentIO& io, int blocks) {
  const FusedBatchedPlan plan = PlanFusedBatched(io.B, H_, blocks, batched_smem_limit_);
  if (plan.smem == 0) {
    return absl::InternalError(absl::StrCat(name(), ": no batch-tiled plan for B=", io.B,
                                            ", H=", H_, " on ", blocks, " blocks"));
  }
  // hT [2][H][Bp]: h(t-1) and h(t), sequences innermost.
  RNNSERVE_RETURN_IF_ERROR(hbuf_.Reserve(2 * int64_t{H_} * plan.Bp * sizeof(float)));
  RNNSERVE_RETURN_IF_ERROR(Project(io));
  FusedBatchedArgs args{.a = Args(io), .plan = plan};
  args.a.hbuf = hbuf_.as<float>();
  return CudaOk(LaunchFusedBatchedKernel(args, stream_),
                absl::StrCat("cudaLaunchCooperativeKernel (", name(), " batch-tiled)").c_str());
}

}  // namespace rnnserve::engine::cuda
