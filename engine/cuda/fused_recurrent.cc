#include "engine/cuda/fused_recurrent.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {
namespace {

DeviceActivation ToDevice(const Activation& a) {
  return DeviceActivation{static_cast<int>(a.kind), a.alpha, a.beta};
}

FusedCell ToFusedCell(CellType c) {
  return c == CellType::kLstm  ? FusedCell::kLstm
         : c == CellType::kGru ? FusedCell::kGru
                               : FusedCell::kSimple;
}

}  // namespace

FusedRecurrent::FusedRecurrent(const RecurrentSpec& spec, cudaStream_t stream)
    : dirs_(static_cast<int>(spec.directions.size())),
      G_(spec.gates()),
      I_(spec.input_size),
      H_(spec.hidden_size),
      Hp_(spec.output_size()),
      stream_(stream) {}

absl::StatusOr<std::unique_ptr<FusedRecurrent>> FusedRecurrent::Create(const RecurrentSpec& spec,
                                                                       cudaStream_t stream) {
  if (spec.directions.empty() || spec.directions.size() > 2) {
    return absl::UnimplementedError("fused recurrent kernel: one or two directions");
  }
  if (spec.proj_size > 0 && spec.cell != CellType::kLstm) {
    return absl::UnimplementedError("fused recurrent kernel: projection on an LSTM only");
  }
  std::unique_ptr<FusedRecurrent> f(new FusedRecurrent(spec, stream));
  const int dirs = f->dirs_, G = f->G_, H = f->H_, Hp = f->Hp_, GH = G * H;

  int device = 0, smem_optin = 0;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaGetDevice(&device), "cudaGetDevice"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "shared memory limit"));
  FusedRecurrentArgs& a = f->base_;
  a.rt_in_smem = FusedRecurrentSmemBytes(G, H, Hp, true) <= static_cast<size_t>(smem_optin);
  f->smem_ = FusedRecurrentSmemBytes(G, H, Hp, a.rt_in_smem);
  if (f->smem_ > static_cast<size_t>(smem_optin)) {
    return absl::UnimplementedError(absl::StrCat("fused recurrent kernel: H=", H, " needs ",
                                                 f->smem_, " bytes of shared memory per block; ",
                                                 smem_optin, " available"));
  }
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(ConfigureFusedRecurrentKernel(f->smem_), "cudaFuncSetAttribute (fused recurrent)"));
  // Enough threads for one gate row each up to 1024; the rows are looped over beyond that.
  f->threads_ = GH >= 1024 ? 1024 : GH > 256 ? 512 : 256;

  a.H = H;
  a.Hp = Hp;
  a.dirs = dirs;
  a.cell = ToFusedCell(spec.cell);
  a.reset_after = spec.reset_after;
  a.input_forget = spec.input_forget;
  a.clip = spec.clip;
  a.keras = spec.masking == MaskSemantics::kKeras;
  a.zero_output_for_mask = spec.zero_output_for_mask;

  // Host-side layouts, then one upload each.
  std::vector<float> W, bias, RT(static_cast<size_t>(dirs) * Hp * GH), PT, bRn, peep;
  const bool gru_ra = spec.cell == CellType::kGru && spec.reset_after;
  for (int d = 0; d < dirs; ++d) {
    const RecurrentDirection& dir = spec.directions[d];
    a.f[d] = ToDevice(dir.f);
    a.g[d] = ToDevice(dir.g);
    a.h[d] = ToDevice(dir.h);
    a.reverse[d] = dir.reverse;
    a.outputs_in_processing_order[d] = dir.outputs_in_processing_order;
    W.insert(W.end(), dir.W.begin(), dir.W.end());
    for (int j = 0; j < GH; ++j) {
      const bool keep_rn = gru_ra && j >= 2 * H;  // bR_n stays inside r * (R_n h + bR_n)
      bias.push_back(dir.bW[j] + (keep_rn ? 0.0f : dir.bR[j]));
    }
    float* rt = RT.data() + static_cast<size_t>(d) * Hp * GH;
    for (int j = 0; j < GH; ++j) {
      for (int k = 0; k < Hp; ++k) rt[static_cast<size_t>(k) * GH + j] = dir.R[size_t(j) * Hp + k];
    }
    if (spec.proj_size > 0) {
      const size_t base = PT.size();
      PT.resize(base + static_cast<size_t>(H) * Hp);
      for (int p = 0; p < Hp; ++p) {
        for (int k = 0; k < H; ++k) PT[base + size_t(k) * Hp + p] = dir.P[size_t(p) * H + k];
      }
    }
    if (gru_ra) bRn.insert(bRn.end(), dir.bR.begin() + 2 * H, dir.bR.begin() + 3 * H);
    if (!dir.peephole.empty()) peep.insert(peep.end(), dir.peephole.begin(), dir.peephole.end());
  }
  if (!peep.empty() && peep.size() != static_cast<size_t>(dirs) * 3 * H) {
    return absl::UnimplementedError(
        "fused recurrent kernel: peepholes on one direction of a bidirectional layer");
  }
  auto upload = [&](const std::vector<float>& v, DeviceBuffer* dst) -> absl::Status {
    if (v.empty()) return absl::OkStatus();
    RNNSERVE_RETURN_IF_ERROR(dst->Reserve(v.size() * sizeof(float)));
    return CudaOk(
        cudaMemcpy(dst->get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy (fused recurrent weights)");
  };
  RNNSERVE_RETURN_IF_ERROR(upload(W, &f->W_));
  RNNSERVE_RETURN_IF_ERROR(upload(bias, &f->bias_));
  RNNSERVE_RETURN_IF_ERROR(upload(RT, &f->RT_));
  RNNSERVE_RETURN_IF_ERROR(upload(PT, &f->PT_));
  RNNSERVE_RETURN_IF_ERROR(upload(bRn, &f->bRn_));
  RNNSERVE_RETURN_IF_ERROR(upload(peep, &f->peephole_));
  a.RT = f->RT_.as<float>();
  a.PT = PT.empty() ? nullptr : f->PT_.as<float>();
  a.bRn = bRn.empty() ? nullptr : f->bRn_.as<float>();
  a.peephole = peep.empty() ? nullptr : f->peephole_.as<float>();

  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasCreate(&f->cublas_), "cublasCreate"));
  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasSetStream(f->cublas_, stream), "cublasSetStream"));
  RNNSERVE_RETURN_IF_ERROR(
      CublasOk(cublasSetMathMode(f->cublas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"));
  return f;
}

FusedRecurrent::~FusedRecurrent() {
  if (cublas_) cublasDestroy(cublas_);
}

absl::Status FusedRecurrent::Forward(const RecurrentIO& io, const uint8_t* step_mask_dev) {
  if (io.B <= 0 || io.T <= 0 || static_cast<int>(io.lengths.size()) != io.B) {
    return absl::InvalidArgumentError(absl::StrCat("fused recurrent kernel: batch of ", io.B,
                                                   " sequences of ", io.T, " steps with ",
                                                   io.lengths.size(), " lengths"));
  }
  const int GH = G_ * H_;
  const int64_t rows = int64_t{io.B} * io.T;
  RNNSERVE_RETURN_IF_ERROR(xproj_.Reserve(rows * dirs_ * GH * sizeof(float)));
  // xproj [rows, dirs*G*H] = x [rows, I] . W^T, W [dirs*G*H, I] row-major: column-major
  // xproj^T [dirs*G*H, rows] = W [dirs*G*H, I] (W^T read transposed) . x^T [I, rows].
  const float one = 1.0f, zero = 0.0f;
  RNNSERVE_RETURN_IF_ERROR(CublasOk(
      cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, dirs_ * GH, static_cast<int>(rows), I_, &one,
                  W_.as<float>(), I_, io.x, I_, &zero, xproj_.as<float>(), dirs_ * GH),
      "cublasSgemm (fused recurrent input projection)"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchBiasActivation(xproj_.as<float>(), bias_.as<float>(), rows,
                                                       dirs_ * GH, DeviceActivation{}, stream_),
                                  "bias kernel (fused recurrent)"));
  FusedRecurrentArgs a = base_;
  a.xproj = xproj_.as<float>();
  SetBatchArgs(io, &a);
  a.step_mask = step_mask_dev;
  a.continues = io.continues;
  return CudaOk(LaunchFusedRecurrentKernel(a, threads_, smem_, stream_),
                "fused recurrent kernel launch");
}

int64_t FusedRecurrent::memory_bytes() const {
  return static_cast<int64_t>(W_.bytes() + bias_.bytes() + RT_.bytes() + PT_.bytes() +
                              bRn_.bytes() + peephole_.bytes() + xproj_.bytes());
}

}  // namespace rnnserve::engine::cuda
