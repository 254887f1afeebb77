#include "engine/cuda/fused_rnn.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {
namespace {

// Why FusedRnn cannot run the layer, or OK.
absl::Status Supports(const RecurrentSpec& spec) {
  if (spec.cell != CellType::kLstm && spec.cell != CellType::kGru) {
    return absl::UnimplementedError("fused RNN: LSTM or GRU only");
  }
  const auto& dirs = spec.directions;
  const bool one = dirs.size() == 1 && !dirs[0].reverse;
  const bool both = dirs.size() == 2 && !dirs[0].reverse && dirs[1].reverse;
  if ((!one && !both) || spec.proj_size > 0) {
    return absl::UnimplementedError(
        "fused RNN: one forward direction, or forward and reverse, without projection only");
  }
  const bool lstm = spec.cell == CellType::kLstm;
  for (const RecurrentDirection& d : dirs) {
    if (d.f.kind != ActivationKind::kSigmoid || d.g.kind != ActivationKind::kTanh ||
        (lstm && d.h.kind != ActivationKind::kTanh) || spec.clip != 0.0f || spec.input_forget ||
        !d.peephole.empty()) {
      return absl::UnimplementedError(
          "fused RNN: sigmoid/tanh activations without clip, peepholes or input_forget only");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FusedRnn>> FusedRnn::Create(const RecurrentSpec& spec,
                                                           cudaStream_t stream,
                                                           FusedRnnWeights weights, bool tf32) {
  RNNSERVE_RETURN_IF_ERROR(Supports(spec));
  const FusedRnnCell cell = spec.cell == CellType::kLstm ? FusedRnnCell::kLstm
                            : spec.reset_after           ? FusedRnnCell::kGru
                                                         : FusedRnnCell::kGruBefore;
  const int H = spec.hidden_size, I = spec.input_size;
  const RecurrentDirection& d = spec.directions[0];
  int device = 0, sms = 0, smem_optin = 0, coop = 0;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaGetDevice(&device), "cudaGetDevice"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "shared memory limit"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device), "cooperative launch"));
  // Half weights of one direction: the cluster, register and batch-tiled kernels; GRU
  // reset_after=False of one direction: the register and batch-tiled kernels (two directions:
  // below). Every kernel but the cluster kernel is a cooperative launch.
  const bool two = spec.directions.size() == 2, half = weights != FusedRnnWeights::kFp32;
  if (cell == FusedRnnCell::kGruBefore && half) {
    return absl::UnimplementedError("fused RNN: GRU reset_after=False in exact FP32 only");
  }
  if (!two && (half || cell == FusedRnnCell::kGruBefore)) {
    std::unique_ptr<FusedRnn> f(new FusedRnn(cell, weights, I, H, {}, 0, stream));
    f->tf32_ = tf32;
    if (cell != FusedRnnCell::kGruBefore) RNNSERVE_RETURN_IF_ERROR(f->FindCluster());
    if (coop) RNNSERVE_RETURN_IF_ERROR(f->PrepareRegisters(sms));
    if (coop) RNNSERVE_RETURN_IF_ERROR(f->PrepareStack(sms));
    // The batch-tiled kernel, from 128 units (below, a grid barrier a step costs more than
    // FusedRecurrent's block a sequence or cuDNN's persistent half kernels): GRU
    // reset_after=False past the register kernel's batches; half weights beside cuDNN's
    // half-precision algorithms (R widened to FP32 in shared memory, every sum FP32).
    if (coop && H >= 128) {
      RNNSERVE_RETURN_IF_ERROR(f->PrepareBatched(sms, smem_optin));
    }
    f->block_reg_ = weights == FusedRnnWeights::kFp32 && H <= kFusedBlockRegMaxHidden;
    if (!f->has_cluster() && f->reg_units_.empty() && !f->has_batched() && !f->block_reg_) {
      return absl::UnimplementedError(
          absl::StrCat(f->name(), ": no cluster, register or batch-tiled kernel for H=", H,
                       weights == FusedRnnWeights::kFp32 ? "" : " with half-precision weights",
                       " on this device"));
    }
    RNNSERVE_RETURN_IF_ERROR(f->Upload(spec.directions));
    // The register and stacked kernels' tags' base (and the register kernel's words).
    if (!f->reg_units_.empty() || f->max_stack_layers() > 0) {
      RNNSERVE_RETURN_IF_ERROR(f->PrepareExchange());
    }
    return f;
  }
  if (!coop) return absl::UnimplementedError("fused RNN: no cooperative launch on this device");
  if (two) {
    // Both directions in one launch of the batch-tiled kernel, half of the SMs each, and (up to
    // kMaxBatch sequences, at the widths it is compiled for) of the register kernel, each
    // direction on blocks of its own, or one launch after the other where they do not fit at
    // once (GRU reset_after=False too: its second exchange or GEMM a step, over r * h(t-1), is
    // each direction's own). Half weights: the batch-tiled kernel from 128 units, as for one
    // direction.
    std::unique_ptr<FusedRnn> f(new FusedRnn(cell, weights, I, H, {}, 0, stream));
    f->dirs_ = 2;
    f->tf32_ = tf32;
    if (!half || H >= 128) RNNSERVE_RETURN_IF_ERROR(f->PrepareBatched(sms / 2, smem_optin));
    RNNSERVE_RETURN_IF_ERROR(f->PrepareRegisters(sms));
    if (!f->has_batched() && f->reg_units_.empty()) {
      return absl::UnimplementedError(
          absl::StrCat(f->name(), ": no batch-tiled or register kernel for two directions of H=", H,
                       " on this device"));
    }
    RNNSERVE_RETURN_IF_ERROR(f->Upload(spec.directions));
    if (!f->reg_units_.empty()) RNNSERVE_RETURN_IF_ERROR(f->PrepareExchange());
    return f;
  }
  // Grid sizes (at most one block per SM) that split H evenly: the largest, and about a half
  // and a quarter of it, each with few enough units a block for its threads' registers to keep
  // every sequence's cells.
  std::vector<int> grids;
  for (int want : {sms, sms / 2, sms / 4}) {
    int blocks = std::min(want, H);
    while (blocks > 1 && H % blocks != 0) --blocks;
    if (blocks >= 1 && (grids.empty() || blocks < grids.back()) &&
        (H / blocks) * kMaxBatch <= kFusedGridCells * kFusedGridThreads) {
      grids.push_back(blocks);
    }
  }
  if (grids.empty()) {
    return absl::UnimplementedError(absl::StrCat("fused RNN: H=", H, " is too wide for the grid"));
  }
  // Shared memory is sized for the smallest grid (the most rows per block).
  size_t smem = FusedRnnSmemBytes(cell, kMaxBatch, H, H / grids.back());
  while (smem > static_cast<size_t>(smem_optin) && grids.size() > 1) {
    grids.pop_back();
    smem = FusedRnnSmemBytes(cell, kMaxBatch, H, H / grids.back());
  }
  if (smem > static_cast<size_t>(smem_optin)) {
    return absl::UnimplementedError(
        absl::StrCat("fused RNN: H=", H, " needs ", smem, " bytes of shared memory per block"));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(ConfigureFusedRnnKernel(cell, H, smem), "cudaFuncSetAttribute"));
  int per_sm = 0;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(MaxFusedRnnBlocksPerSm(cell, H, smem, &per_sm), "occupancy"));
  if (per_sm * sms < grids.front()) {
    return absl::UnimplementedError("fused RNN: the grid does not fit on the device at once");
  }
  std::unique_ptr<FusedRnn> f(
      new FusedRnn(cell, FusedRnnWeights::kFp32, I, H, std::move(grids), smem, stream));
  RNNSERVE_RETURN_IF_ERROR(f->Upload(spec.directions));
  RNNSERVE_RETURN_IF_ERROR(f->PrepareExchange());
  RNNSERVE_RETURN_IF_ERROR(f->PrepareRegisters(sms));
  RNNSERVE_RETURN_IF_ERROR(f->PrepareStack(sms));
  RNNSERVE_RETURN_IF_ERROR(f->FindCluster());
  RNNSERVE_RETURN_IF_ERROR(f->PrepareSmall(d, smem_optin));
  f->tf32_ = tf32;
  RNNSERVE_RETURN_IF_ERROR(f->PrepareBatched(sms, smem_optin));
  f->block_reg_ = H <= kFusedBlockRegMaxHidden;
  return f;
}

absl::Status FusedRnn::Upload(const std::vector<RecurrentDirection>& dirs) {
  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasCreate(&cublas_), "cublasCreate"));
  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasSetStream(cublas_, stream_), "cublasSetStream"));
  // TF32 layers project in TF32 too, as cuDNN's and PyTorch's TF32 modes do.
  RNNSERVE_RETURN_IF_ERROR(CublasOk(
      cublasSetMathMode(cublas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH),
      "cublasSetMathMode"));
  const int G = G_, H = H_;
  // The directions side by side: W [dirs*G*H, I] (one projection for both; stored transposed,
  // [I, dirs*G*H], which cuBLAS multiplies ~8 % faster at these shapes), R [dirs][G*H][H],
  // bias [dirs*G*H], bRn [dirs][H]. bias is bW + bR of every gate but the GRU's n: its bR
  // stays apart (bRn), inside r * (...).
  const int folded = cell_ == FusedRnnCell::kGru ? 2 * H : G * H;
  std::vector<float> W, R, bias, bRn;
  for (const RecurrentDirection& d : dirs) {
    W.insert(W.end(), d.W.begin(), d.W.end());
    R.insert(R.end(), d.R.begin(), d.R.end());
    const size_t at = bias.size();
    bias.insert(bias.end(), d.bW.begin(), d.bW.begin() + G * H);
    for (int i = 0; i < folded; ++i) bias[at + i] += d.bR[i];
    if (cell_ == FusedRnnCell::kGru)
      bRn.insert(bRn.end(), d.bR.begin() + 2 * H, d.bR.begin() + 3 * H);
  }
  auto upload = [&](const std::vector<float>& v, DeviceBuffer* dst) -> absl::Status {
    RNNSERVE_RETURN_IF_ERROR(dst->Reserve(v.size() * sizeof(float)));
    return CudaOk(
        cudaMemcpy(dst->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy (fused RNN weights)");
  };
  const size_t rows = W.size() / I_;
  std::vector<float> Wt(W.size());
  for (size_t r = 0; r < rows; ++r) {
    for (int k = 0; k < I_; ++k) Wt[static_cast<size_t>(k) * rows + r] = W[r * I_ + k];
  }
  RNNSERVE_RETURN_IF_ERROR(upload(Wt, &W_));
  RNNSERVE_RETURN_IF_ERROR(upload(bias, &bias_));
  if (cell_ == FusedRnnCell::kGru) RNNSERVE_RETURN_IF_ERROR(upload(bRn, &bRn_));
  if (weights_ == FusedRnnWeights::kFp32) return upload(R, &R_);
  // R rounded to nearest (even) in the layer's half precision, on the device, as cuDNN's
  // weights are (CudnnRecurrent::PackWeights).
  DeviceBuffer staging;
  RNNSERVE_RETURN_IF_ERROR(upload(R, &staging));
  RNNSERVE_RETURN_IF_ERROR(R_.Reserve(R.size() * sizeof(uint16_t)));
  const HalfKind kind = weights_ == FusedRnnWeights::kBf16 ? HalfKind::kBf16 : HalfKind::kFp16;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(
      LaunchToHalf(staging.as<float>(), R_.get(), static_cast<int64_t>(R.size()), kind, stream_),
      "R to half"));
  return CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (fused RNN weights)");
}

absl::Status FusedRnn::PrepareExchange() {
  // Sized for the largest batch once (of each direction), so that the words never move (a
  // graph keeps them) and start as zeros, which no launch's tags are.
  const size_t bytes = static_cast<size_t>(dirs_) * FusedRnnXchgParts(cell_) *
                       FusedRnnXchgStride(kMaxBatch, H_) * sizeof(unsigned long long);
  RNNSERVE_RETURN_IF_ERROR(xchg_.Reserve(bytes));
  RNNSERVE_RETURN_IF_ERROR(sync_.Reserve(sizeof(FusedRnnSync)));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemset(xchg_.get(), 0, bytes), "cudaMemset (fused RNN)"));
  return CudaOk(cudaMemset(sync_.get(), 0, sizeof(FusedRnnSync)), "cudaMemset (fused RNN)");
}

absl::Status FusedRnn::PrepareRegisters(int sms) {
  if (!FusedRnnRegCompiled(H_)) return absl::OkStatus();
  const size_t smem = FusedRnnRegSmemBytes(cell_, kMaxBatch, H_);
  if (ConfigureFusedRnnRegKernel(cell_, H_, weights_, smem) != cudaSuccess) {
    cudaGetLastError();  // not offered; the error is not sticky
    return absl::OkStatus();
  }
  // The fewest units a block (the most blocks: a direction's at most one an SM) that the device
  // runs at once, and twice that (a cheaper exchange, twice the work a block); the chooser
  // times them. Two directions: both at once where their blocks fit together, else one launch
  // after the other (RegistersApart).
  for (int U = 1; U * 32 <= kFusedRegMaxThreads && reg_units_.size() < 2; ++U) {
    if (H_ % U != 0 || H_ / U > sms || (!reg_units_.empty() && U != 2 * reg_units_.front())) {
      continue;
    }
    int per_sm = 0;
    if (MaxFusedRnnRegBlocksPerSm(cell_, H_, weights_, U, smem, &per_sm) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (per_sm * sms < H_ / U) continue;
    reg_units_.push_back(U);
    reg_blocks_per_sm_[U] = per_sm;
    // Groups of sequences on blocks of their own, as many an SM as the device runs at once.
    for (int groups : {2, 4}) {
      if (per_sm * sms >= groups * (H_ / U)) reg_groups_.push_back({U, groups});
    }
  }
  sms_ = sms;
  reg_smem_ = smem;
  return absl::OkStatus();
}

absl::Status FusedRnn::ForwardRegisters(const RecurrentIO& io, int units, int groups, bool apart) {
  if (std::find(reg_units_.begin(), reg_units_.end(), units) == reg_units_.end() ||
      (groups != 1 && std::find(reg_groups_.begin(), reg_groups_.end(),
                                std::make_pair(units, groups)) == reg_groups_.end())) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": no register kernel with ", units,
                                                      " units a block in ", groups,
                                                      " groups for H=", H_));
  }
  if (groups > io.B) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": ", groups, " groups for a batch of ", io.B));
  }
  if (io.B > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " takes batches of at most ", kMaxBatch, "; got ", io.B));
  }
  if (apart && dirs_ != 2) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": one direction, none apart"));
  }
  return Launch(io, RegistersLaunch(units, groups), apart);
}

const char* FusedRnn::name() const {
  switch (cell_) {
    case FusedRnnCell::kLstm:
      return "fused LSTM";
    case FusedRnnCell::kGru:
      return "fused GRU";
    case FusedRnnCell::kGruBefore:
      return "fused GRU (reset_after=False)";
  }
  return "fused RNN";
}

absl::Status FusedRnn::PrepareSmall(const RecurrentDirection& d, int smem_optin) {
  if ((cell_ != FusedRnnCell::kLstm && cell_ != FusedRnnCell::kGru) || H_ > kSmallMaxHidden) {
    return absl::OkStatus();
  }
  const auto limit = static_cast<size_t>(smem_optin);
  // The most sequences (up to kMaxBatch) whose states fit beside the weights, then the most
  // steps (up to 16) whose input projections do.
  int most = kMaxBatch;
  while (most > 0 && FusedRnnSmallSmemBytes(cell_, most, I_, H_, 1) > limit) --most;
  if (most == 0) return absl::OkStatus();
  int chunk = 16;
  while (chunk > 1 && FusedRnnSmallSmemBytes(cell_, most, I_, H_, chunk) > limit) chunk /= 2;
  const size_t smem = FusedRnnSmallSmemBytes(cell_, most, I_, H_, chunk);
  if (ConfigureFusedRnnSmallKernel(cell_, H_, smem) != cudaSuccess) {
    cudaGetLastError();  // not offered; the error is not sticky
    return absl::OkStatus();
  }
  const int G = G_ * H_;
  std::vector<float> wt(static_cast<size_t>(I_) * G), rt(static_cast<size_t>(H_) * G);
  for (int r = 0; r < G; ++r) {
    for (int k = 0; k < I_; ++k)
      wt[static_cast<size_t>(k) * G + r] = d.W[static_cast<size_t>(r) * I_ + k];
    for (int k = 0; k < H_; ++k)
      rt[static_cast<size_t>(k) * G + r] = d.R[static_cast<size_t>(r) * H_ + k];
  }
  for (auto [v, dst] : {std::pair{&wt, &Wt_}, std::pair{&rt, &Rt_}}) {
    RNNSERVE_RETURN_IF_ERROR(dst->Reserve(std::max<size_t>(v->size(), 1) * sizeof(float)));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemcpy(dst->get(), v->data(), v->size() * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy (fused RNN weights, one block)"));
  }
  small_max_batch_ = most;
  small_smem_ = smem;
  small_chunk_ = chunk;
  return absl::OkStatus();
}

absl::Status FusedRnn::FindCluster() {
  int device = 0, smem_optin = 0, cluster_launch = 0;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaGetDevice(&device), "cudaGetDevice"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "shared memory limit"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(
      cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device), "cluster launch"));
  if (!cluster_launch) return absl::OkStatus();
  for (FusedRnnClusterShape shape : FusedRnnClusterShapes(cell_, H_, weights_)) {
    const size_t smem = FusedRnnClusterSmemBytes(cell_, kMaxBatch, H_, shape, weights_);
    if (smem > static_cast<size_t>(smem_optin)) continue;
    int clusters = 0;
    if (ConfigureFusedRnnClusterKernel(cell_, H_, shape, weights_, smem) != cudaSuccess ||
        MaxActiveFusedRnnClusters(cell_, H_, shape, weights_, smem, &clusters) != cudaSuccess) {
      cudaGetLastError();  // this size does not run here; the error is not sticky
      continue;
    }
    if (clusters >= 1) {
      clusters_.push_back({.shape = shape, .smem = smem});
      // Exact FP32 keeps the largest size that runs; half weights time every kernel.
      if (weights_ == FusedRnnWeights::kFp32) break;
    }
  }
  return absl::OkStatus();
}

FusedRnn::~FusedRnn() {
  if (cublas_) cublasDestroy(cublas_);
}

absl::Status FusedRnn::Forward(const RecurrentIO& io, Kernel kernel) {
  if (kernel == Kernel::kBatched) {
    if (!has_batched()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": no batch-tiled kernel for H=", H_, " on this device"));
    }
    auto shape = ChooseBatched(io);
    if (!shape.ok()) return shape.status();
    return ForwardBatched(io, *shape);
  }
  // Past kMaxBatch only the one-block register kernel (Kernel::kGrid) runs a batch.
  if (io.B > kMaxBatch && !(kernel == Kernel::kGrid && block_reg_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " takes batches of at most ", kMaxBatch, "; got ", io.B));
  }
  if (kernel == Kernel::kOneBlock) {
    if (io.B > small_max_batch_) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(), ": no one-block kernel for I=", I_, ", H=", H_, ", B=", io.B,
          small_max_batch_ > 0 ? absl::StrCat(" (it takes up to ", small_max_batch_, ")") : ""));
    }
    return Launch(io, 0);
  }
  if (kernel == Kernel::kRegisters) {
    if (reg_units_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": no register kernel for H=", H_, " on this device"));
    }
    return Launch(io, RegistersLaunch(reg_units_.front(), 1));
  }
  if (kernel == Kernel::kCluster) {
    if (!has_cluster()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), ": no thread-block cluster kernel for H=", H_, " on this device"));
    }
    return LaunchCluster(io);
  }
  if (!has_grid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": no grid or register kernel for H=", H_, " with these weights"));
  }
  auto blocks = ChooseGrid(io);
  if (!blocks.ok()) return blocks.status();
  return Launch(io, *blocks);
}

std::vector<int> FusedRnn::one_block_register_lanes() const {
  std::vector<int> out;
  for (int lanes : kFusedBlockRegLanes) {
    if (block_reg_ && FusedRnnBlockRegCompiled(cell_, H_, lanes)) out.push_back(lanes);
  }
  return out;
}

absl::Status FusedRnn::ForwardOneBlockRegisters(const RecurrentIO& io, int lanes, int per_block) {
  if (!block_reg_ || !FusedRnnBlockRegCompiled(cell_, H_, lanes) || per_block < 0 ||
      per_block > lanes) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": no one-block register kernel for H=", H_, " with ", lanes,
                     " lanes a unit and ", per_block, " sequences a block"));
  }
  return Launch(io, BlockRegLaunch(lanes, per_block == 0 ? lanes : per_block));
}

std::vector<FusedRnnClusterShape> FusedRnn::cluster_shapes() const {
  std::vector<FusedRnnClusterShape> out;
  for (const ClusterKernel& k : clusters_) out.push_back(k.shape);
  return out;
}

absl::Status FusedRnn::ForwardCluster(const RecurrentIO& io, int index) {
  if (index < 0 || index >= static_cast<int>(clusters_.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        name(), ": no cluster kernel ", index, " for H=", H_, "; ", clusters_.size(), " offered"));
  }
  if (io.B > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " takes batches of at most ", kMaxBatch, "; got ", io.B));
  }
  return LaunchClusterOf(io, index);
}

absl::Status FusedRnn::Project(const RecurrentIO& io, bool add_bias) {
  const int64_t rows = int64_t{io.B} * io.T;
  const int N = dirs_ * G_ * H_;  // the gates of every direction
  RNNSERVE_RETURN_IF_ERROR(xproj_.Reserve(rows * N * sizeof(float)));
  // xproj [rows, N] = x [rows, I] . W^T, W^T [I, N] row-major (W_): column-major
  // xproj^T [N, rows] = W [N, I] (W_ read as is) . x^T [I, rows].
  if (rows * N * I_ <= kFusedSmallProjectionFmas) {
    return CudaOk(
        LaunchFusedRnnSmallProjection(io.x, W_.as<float>(), add_bias ? bias_.as<float>() : nullptr,
                                      xproj_.as<float>(), rows, I_, N, stream_),
        "small input projection kernel");
  }
  const float one = 1.0f, zero = 0.0f;
  RNNSERVE_RETURN_IF_ERROR(
      CublasOk(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, N, static_cast<int>(rows), I_, &one,
                           W_.as<float>(), N, io.x, I_, &zero, xproj_.as<float>(), N),
               "cublasSgemm (fused RNN input projection)"));
  if (!add_bias) return absl::OkStatus();
  return CudaOk(LaunchBiasActivation(xproj_.as<float>(), bias_.as<float>(), rows, N,
                                     DeviceActivation{}, stream_),
                "bias kernel");
}

FusedRnnArgs FusedRnn::Args(const RecurrentIO& io) const {
  FusedRnnArgs a;
  a.cell = cell_;
  a.xproj = xproj_.as<float>();
  a.weights = weights_;
  if (weights_ == FusedRnnWeights::kFp32) {
    a.R = R_.as<float>();
  } else {
    a.R16 = R_.as<uint16_t>();
  }
  a.bRn = cell_ == FusedRnnCell::kGru ? bRn_.as<float>() : nullptr;
  SetBatchArgs(io, &a);
  a.H = H_;
  a.steps = *std::max_element(io.lengths.begin(), io.lengths.end());
  return a;
}

absl::Status FusedRnn::Launch(const RecurrentIO& io, int blocks, bool apart) {
  if (blocks == 0) {
    FusedRnnSmallArgs p{.a = Args(io),
                        .x = io.x,
                        .Wt = Wt_.as<float>(),
                        .Rt = Rt_.as<float>(),
                        .bias = bias_.as<float>(),
                        .I = I_,
                        .chunk = small_chunk_};
    return CudaOk(LaunchFusedRnnSmallKernel(p, small_smem_, stream_),
                  absl::StrCat("kernel launch (", name(), ", one block)").c_str());
  }
  RNNSERVE_RETURN_IF_ERROR(Project(io));
  FusedRnnArgs a = Args(io);
  if (blocks > kBlockRegLaunch) {
    a.seqs_per_block = BlockRegPerBlock(blocks);
    return CudaOk(LaunchFusedRnnBlockRegKernel(a, BlockRegLanes(blocks), stream_),
                  absl::StrCat("kernel launch (", name(), ", one block, registers)").c_str());
  }
  a.xchg = xchg_.as<unsigned long long>();
  a.sync = sync_.as<FusedRnnSync>();
  a.xchg_stride = FusedRnnXchgStride(io.B, H_);
  if (blocks < 0) {
    a.U = -blocks % kRegGroupsCode;
    a.groups = -blocks / kRegGroupsCode + 1;
    const int seqs = (io.B + a.groups - 1) / a.groups;
    a.xchg_stride = FusedRnnXchgStride(seqs, H_);
    a.dirs = dirs_;
    const int64_t words = int64_t{dirs_} * a.groups * FusedRnnXchgParts(cell_) * a.xchg_stride;
    if (words * static_cast<int64_t>(sizeof(unsigned long long)) >
        static_cast<int64_t>(xchg_.bytes())) {
      return absl::InvalidArgumentError(absl::StrCat(name(), ": ", a.groups, " groups of ", seqs,
                                                     " sequences exceed the exchange words"));
    }
    apart = apart || RegistersApart(a.U, a.groups);
    for (int d = apart ? 0 : -1; d < (apart ? dirs_ : 0); ++d) {
      a.only_dir = d;
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(LaunchFusedRnnRegKernel(a, H_ / a.U, reg_smem_, stream_),
                 absl::StrCat("cudaLaunchCooperativeKernel (", name(), ", registers)").c_str()));
    }
    return absl::OkStatus();
  }
  a.U = H_ / blocks;
  return CudaOk(LaunchFusedRnnKernel(a, blocks, smem_, stream_),
                absl::StrCat("cudaLaunchCooperativeKernel (", name(), ")").c_str());
}

absl::Status FusedRnn::LaunchClusterOf(const RecurrentIO& io, int index) {
  RNNSERVE_RETURN_IF_ERROR(Project(io));
  const ClusterKernel& k = clusters_[index];
  return CudaOk(LaunchFusedRnnClusterKernel(Args(io), k.shape, k.smem, stream_),
                absl::StrCat("cudaLaunchKernelEx (", name(), " cluster)").c_str());
}

int64_t FusedRnn::memory_bytes() const {
  return static_cast<int64_t>(W_.bytes() + R_.bytes() + bias_.bytes() + bRn_.bytes() +
                              xproj_.bytes() + hbuf_.bytes() + xchg_.bytes() + sync_.bytes() +
                              stack_xchg_.bytes() + stack_done_.bytes() + Wt_.bytes() +
                              Rt_.bytes());
}

}  // namespace rnnserve::engine::cuda
