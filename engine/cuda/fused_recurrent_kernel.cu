// The step kernel of FusedRecurrent (fused_recurrent.h): block (b, d) runs sequence b through
// direction d's valid steps. Plain FP32: FMAs and precise expf / tanhf, each formula in the
// order engine/cpu/recurrent_direction.cc computes it, so both engines compute the same cell.

#include "engine/cuda/device_activation.cuh"
#include "engine/cuda/fused_recurrent_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

__device__ __forceinline__ float Clip(float x, float clip) {
  return clip > 0.0f ? fminf(fmaxf(x, -clip), clip) : x;
}

// out[j] = sum_k RT[k * ld + j] * v[k] for j < rows, k < n: thread j sums its column in order.
__device__ __forceinline__ void MatVec(const float* RT, int ld, const float* v, int n, int rows,
                                       float* out) {
  for (int j = threadIdx.x; j < rows; j += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc = fmaf(RT[static_cast<int64_t>(k) * ld + j], v[k], acc);
    out[j] = acc;
  }
}

// Shared memory: gates [G*H], h [H'], c [H], tmp [H] (LSTM o * h(c) before the projection,
// GRU reset_after=false r * h), then RT [H', G*H] when staged.
__global__ void __launch_bounds__(1024) FusedRecurrentKernel(FusedRecurrentArgs a) {
  extern __shared__ float smem[];
  const int b = blockIdx.x, d = blockIdx.y;
  const int B = a.B, T = a.T, H = a.H, Hp = a.Hp;
  const int G = a.cell == FusedCell::kLstm ? 4 : a.cell == FusedCell::kGru ? 3 : 1;
  const int GH = G * H;
  float* gates = smem;
  float* h = gates + GH;
  float* c = h + Hp;
  float* tmp = c + H;
  const float* RT = a.RT + static_cast<int64_t>(d) * Hp * GH;
  if (a.rt_in_smem) {
    float* staged = tmp + H;
    for (int i = threadIdx.x; i < Hp * GH; i += blockDim.x) staged[i] = RT[i];
    RT = staged;
  }
  const float* PT = a.PT ? a.PT + static_cast<int64_t>(d) * H * Hp : nullptr;
  const float* bRn = a.bRn ? a.bRn + static_cast<int64_t>(d) * H : nullptr;
  const float* peep = a.peephole ? a.peephole + static_cast<int64_t>(d) * 3 * H : nullptr;
  const DeviceActivation fa = a.f[d], ga = a.g[d], ha = a.h[d];
  const int64_t state = static_cast<int64_t>(d) * B + b;  // row of [dirs, B, *]
  for (int k = threadIdx.x; k < Hp; k += blockDim.x) h[k] = a.h0 ? a.h0[state * Hp + k] : 0.0f;
  for (int u = threadIdx.x; u < H; u += blockDim.x) c[u] = a.c0 ? a.c0[state * H + u] : 0.0f;
  __syncthreads();

  const int len = a.lengths[b];
  const bool reverse = a.reverse[d], in_order = a.outputs_in_processing_order[d];
  const bool zero_masked = a.keras && a.zero_output_for_mask;
  const int64_t ystride = static_cast<int64_t>(a.dirs) * Hp;
  const int64_t xstride = static_cast<int64_t>(a.dirs) * GH;
  const bool gru_rb = a.cell == FusedCell::kGru && !a.reset_after;
  // A valid step has run (or the batch continues its sequences): masked steps repeat h.
  bool seen_valid = a.continues;
  auto emit = [&](int pos, bool zero) {
    if (a.y == nullptr) return;
    float* dst = a.y + (static_cast<int64_t>(b) * T + pos) * ystride + static_cast<int64_t>(d) * Hp;
    for (int k = threadIdx.x; k < Hp; k += blockDim.x) dst[k] = zero ? 0.0f : h[k];
  };

  for (int st = 0; st < len; ++st) {
    const int t = reverse ? len - 1 - st : st;
    const int pos = in_order ? (T - len) + st : t;
    // Keras: a masked step keeps the state and repeats the last output (zero before the
    // first valid step, or always with zero_output_for_mask). Uniform across the block.
    if (a.step_mask != nullptr && !a.step_mask[static_cast<int64_t>(b) * T + t]) {
      emit(pos, zero_masked || !seen_valid);
      continue;
    }
    seen_valid = true;
    const float* xp = a.xproj + (static_cast<int64_t>(b) * T + t) * xstride + int64_t{d} * GH;
    // gates [rows] = R . h(t-1) (GRU reset_after=false: the r and z rows only).
    MatVec(RT, GH, h, Hp, gru_rb ? 2 * H : GH, gates);
    __syncthreads();
    if (a.cell == FusedCell::kLstm) {
      float* hv = PT ? tmp : h;  // o * h(c), projected below when there is a projection
      for (int u = threadIdx.x; u < H; u += blockDim.x) {
        float zi = gates[u] + xp[u], zf = gates[H + u] + xp[H + u];
        float zc = gates[2 * H + u] + xp[2 * H + u], zo = gates[3 * H + u] + xp[3 * H + u];
        const float cprev = c[u];
        if (peep) {
          zi += peep[u] * cprev;
          zf += peep[H + u] * cprev;
        }
        zi = Clip(zi, a.clip);
        zf = Clip(zf, a.clip);
        zc = Clip(zc, a.clip);
        if (!peep) zo = Clip(zo, a.clip);  // else zo waits for its peephole
        const float ig = Activate(fa, zi);
        const float fg = a.input_forget ? 1.0f - ig : Activate(fa, zf);
        const float cg = Activate(ga, zc);
        const float cn = fg * cprev + ig * cg;
        c[u] = cn;
        if (peep) zo = Clip(zo + peep[2 * H + u] * cn, a.clip);
        hv[u] = Activate(fa, zo) * Activate(ha, cn);
      }
      if (PT) {
        __syncthreads();
        MatVec(PT, Hp, tmp, H, Hp, h);  // h [H'] = P . (o * h(c))
      }
    } else if (a.cell == FusedCell::kGru) {
      if (a.reset_after) {
        for (int u = threadIdx.x; u < H; u += blockDim.x) {
          const float r = Activate(fa, Clip(gates[u] + xp[u], a.clip));
          const float z = Activate(fa, Clip(gates[H + u] + xp[H + u], a.clip));
          const float n =
              Activate(ga, Clip(xp[2 * H + u] + r * (gates[2 * H + u] + bRn[u]), a.clip));
          h[u] = (1.0f - z) * n + z * h[u];
        }
      } else {
        for (int u = threadIdx.x; u < H; u += blockDim.x) {
          const float r = Activate(fa, Clip(gates[u] + xp[u], a.clip));
          gates[H + u] = Activate(fa, Clip(gates[H + u] + xp[H + u], a.clip));  // z
          tmp[u] = r * h[u];
        }
        __syncthreads();
        MatVec(RT + 2 * H, GH, tmp, H, H, gates + 2 * H);  // n rows . (r * h)
        __syncthreads();
        for (int u = threadIdx.x; u < H; u += blockDim.x) {
          const float z = gates[H + u];
          const float n = Activate(ga, Clip(gates[2 * H + u] + xp[2 * H + u], a.clip));
          h[u] = (1.0f - z) * n + z * h[u];
        }
      }
    } else {
      for (int u = threadIdx.x; u < H; u += blockDim.x) {
        h[u] = Activate(fa, Clip(gates[u] + xp[u], a.clip));
      }
    }
    __syncthreads();
    emit(pos, false);
  }

  // Final states, then the positions no step wrote. Only a forward Keras layer has positions
  // after its last step, and Keras repeats the last output there; every other unwritten
  // position precedes the first processed step (or is ONNX padding) and is zero.
  for (int k = threadIdx.x; k < Hp; k += blockDim.x) a.hy[state * Hp + k] = h[k];
  if (a.cy) {
    for (int u = threadIdx.x; u < H; u += blockDim.x) a.cy[state * H + u] = c[u];
  }
  if (a.y != nullptr && len < T) {
    const bool repeat = a.keras && !a.zero_output_for_mask && !reverse && (len > 0 || a.continues);
    const int from = in_order ? 0 : len, to = in_order ? T - len : T;
    for (int p = from; p < to; ++p) emit(p, !repeat);
  }
}

}  // namespace

cudaError_t ConfigureFusedRecurrentKernel(size_t smem) {
  return RaiseDynamicSmemLimit(FusedRecurrentKernel, smem);
}

cudaError_t LaunchFusedRecurrentKernel(const FusedRecurrentArgs& args, int threads, size_t smem,
                                       cudaStream_t stream) {
  FusedRecurrentKernel<<<dim3(args.B, args.dirs), threads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
