// FusedRnn's stacked register kernel (fused_rnn_kernel.h: FusedRnnStackArgs): which stacks it is
// offered for, and its launch over this layer and the layers above it.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/stack_timing.h"

namespace rnnserve::engine::cuda {

absl::Status FusedRnn::PrepareStack(int sms) {
  if (!FusedRnnStackCompiled(cell_, H_, weights_)) return absl::OkStatus();
  const size_t smem = FusedRnnStackSmemBytes(cell_, kMaxBatch, H_);
  if (ConfigureFusedRnnStackKernel(cell_, H_, weights_, smem) != cudaSuccess) {
    cudaGetLastError();  // not offered; the error is not sticky
    return absl::OkStatus();
  }
  // Every layer's blocks at once: 4 or 8 units a block (blocks of 2 units, several an SM, ran
  // no faster and timed unevenly from launch to launch).
  for (int U = 4; U * 32 <= kFusedRegMaxThreads; U *= 2) {
    int per_sm = 0;
    if (H_ % U != 0 ||
        MaxFusedRnnStackBlocksPerSm(cell_, H_, weights_, U, smem, &per_sm) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    const int layers = std::min(kFusedStackMaxLayers, per_sm * sms / (H_ / U));
    if (layers >= 2) stack_fit_.push_back({U, layers});
  }
  stack_smem_ = smem;
  return absl::OkStatus();
}

int FusedRnn::max_stack_layers() const {
  int most = 0;
  for (const auto& [units, layers] : stack_fit_) most = std::max(most, layers);
  return most;
}

std::vector<int> FusedRnn::stack_units(int layers) const {
  std::vector<int> out;
  for (const auto& [units, most] : stack_fit_) {
    if (layers <= most) out.push_back(units);
  }
  return out;
}

bool FusedRnn::Stacks(const FusedRnn& upper) const {
  return max_stack_layers() >= 2 && upper.weights_ == weights_ && dirs_ == 1 && upper.dirs_ == 1 &&
         upper.cell_ == cell_ && upper.H_ == H_ && upper.I_ == H_;
}

absl::Status FusedRnn::ForwardStack(const RecurrentIO& io, const std::vector<StackLayer>& uppers,
                                    int units) {
  const int layers = 1 + static_cast<int>(uppers.size());
  if (uppers.empty() || layers > max_stack_layers()) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": no stacked kernel for ", layers,
                                                      " layers of H=", H_, " on this device"));
  }
  const FusedRnn* below = this;
  for (const StackLayer& u : uppers) {
    if (!below->Stacks(*u.rnn)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": no stacked kernel for a layer and the next (H=", below->H_,
                       ", next ", u.rnn->name(), " I=", u.rnn->I_, " H=", u.rnn->H_, ")"));
    }
    if (io.B > kMaxBatch || u.io.B != io.B || u.io.T != io.T ||
        !std::equal(io.lengths.begin(), io.lengths.end(), u.io.lengths.begin(),
                    u.io.lengths.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(), ": a stack takes one batch of at most ", kMaxBatch,
          " sequences with the same lengths in every layer; got ", io.B, " and ", u.io.B));
    }
    below = u.rnn;
  }
  const std::vector<int> offered = stack_units(layers);
  if (units != 0) {
    if (std::find(offered.begin(), offered.end(), units) == offered.end()) {
      return absl::FailedPreconditionError(absl::StrCat(name(), ": no stacked kernel of ", layers,
                                                        " layers with ", units, " units a block"));
    }
    return LaunchStack(io, uppers, units);
  }
  const std::pair<int, int> key = {io.B, layers};
  if (auto it = stack_by_batch_.find(key); it != stack_by_batch_.end()) {
    return LaunchStack(io, uppers, it->second);
  }
  bool timed = false;
  auto best = Fastest(
      offered, [&](int u) { return LaunchStack(io, uppers, u); }, &timed);
  if (!best.ok()) return best.status();
  if (timed) stack_by_batch_[key] = *best;
  return LaunchStack(io, uppers, *best);
}

std::string FusedRnn::StackKernelFor(int B, int layers) const {
  auto it = stack_by_batch_.find({B, layers});
  return it == stack_by_batch_.end() ? "" : absl::StrCat("u", it->second);
}

absl::Status FusedRnn::ForwardChain(const std::vector<StackLayer>& layers) {
  auto apart = [&]() -> absl::Status {
    for (const StackLayer& e : layers) RNNSERVE_RETURN_IF_ERROR(e.rnn->ForwardFastest(e.io));
    return absl::OkStatus();
  };
  if (layers.empty()) return absl::OkStatus();
  FusedRnn& bottom = *layers[0].rnn;
  const RecurrentIO& io = layers[0].io;
  auto stacks_on = [&](size_t i) {
    const RecurrentIO& up = layers[i + 1].io;
    return layers[i].rnn->Stacks(*layers[i + 1].rnn) && up.B == io.B && up.T == io.T &&
           up.x == layers[i].io.y &&
           std::equal(io.lengths.begin(), io.lengths.end(), up.lengths.begin(), up.lengths.end());
  };
  const std::vector<int> runs = StackRuns(
      layers.size(),
      [&](size_t i) { return io.B <= kMaxBatch ? layers[i].rnn->max_stack_layers() : 0; },
      stacks_on);
  // Against every layer apart, each on its fastest kernel.
  return RunStackedOrApart(&bottom.chain_by_batch_, io.B, io.T, runs, bottom.stream_, apart,
                           [&](size_t i, int n) -> absl::Status {
                             const StackLayer& base = layers[i];
                             if (n == 1) return base.rnn->ForwardFastest(base.io);
                             const std::vector<StackLayer> uppers(layers.begin() + i + 1,
                                                                  layers.begin() + i + n);
                             return base.rnn->ForwardStack(base.io, uppers);
                           });
}

std::string FusedRnn::ChainFor(int B, int T) const {
  return StackChoiceFor(chain_by_batch_, B, T,
                        [&](int b, int layers) { return StackKernelFor(b, layers); });
}

std::string FusedRnn::ChainSummary() const {
  return StackChoicesSummary(chain_by_batch_,
                             [&](int b, int layers) { return StackKernelFor(b, layers); });
}

absl::Status FusedRnn::LaunchStack(const RecurrentIO& io, const std::vector<StackLayer>& uppers,
                                   int units) {
  // Each layer's words: FusedRnnStackXchgBlocks blocks of the widest batch's stride.
  const int64_t words = FusedRnnStackXchgBlocks(cell_) * FusedRnnXchgStride(kMaxBatch, H_);
  if (stack_xchg_.get() == nullptr) {
    // Allocated with the first stacked batch (run eagerly before any graph is captured), zeroed:
    // no launch's tags are zero.
    if (StreamCapturing(stream_)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": a stacked batch captured before one ran eagerly"));
    }
    const size_t bytes = size_t{kFusedStackMaxLayers} * words * sizeof(unsigned long long);
    const size_t done_bytes = size_t{kFusedStackMaxLayers - 1} * H_ * sizeof(unsigned);
    RNNSERVE_RETURN_IF_ERROR(stack_xchg_.Reserve(bytes));
    RNNSERVE_RETURN_IF_ERROR(stack_done_.Reserve(done_bytes));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemset(stack_xchg_.get(), 0, bytes), "cudaMemset (fused RNN stack)"));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemset(stack_done_.get(), 0, done_bytes), "cudaMemset (fused RNN stack)"));
  }
  RNNSERVE_RETURN_IF_ERROR(Project(io));
  FusedRnnStackArgs sa;
  sa.layers = 1 + static_cast<int>(uppers.size());
  sa.a[0] = Args(io);
  for (size_t l = 0; l < uppers.size(); ++l) {
    const FusedRnn& u = *uppers[l].rnn;
    sa.a[l + 1] = u.Args(uppers[l].io);
    sa.a[l + 1].xproj = nullptr;
    sa.W[l + 1] = u.W_.as<float>();
    sa.bias[l + 1] = u.bias_.as<float>();
  }
  auto* xchg = stack_xchg_.as<unsigned long long>();
  for (int l = 0; l < sa.layers; ++l) {
    FusedRnnArgs& a = sa.a[l];
    a.xchg = xchg + l * words;
    a.sync = sync_.as<FusedRnnSync>();
    a.xchg_stride = FusedRnnXchgStride(io.B, H_);
    a.U = units;
  }
  sa.done = stack_done_.as<unsigned>();
  return CudaOk(LaunchFusedRnnStackKernel(sa, stack_smem_, stream_),
                absl::StrCat("cudaLaunchCooperativeKernel (", name(), ", stacked)").c_str());
}

}  // namespace rnnserve::engine::cuda
