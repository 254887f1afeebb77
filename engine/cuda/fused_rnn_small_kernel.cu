// The one-block LSTM and GRU (reset_after) kernel of FusedRnn for small H (fused_rnn_kernel.h).
// Plain FP32: FMAs and precise expf / tanhf, as the CPU engine computes them.

#include <algorithm>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

// dst[0..n) = src[0..n) by the whole block, four loads issued before their stores.
__device__ __forceinline__ void CopyToShared(float4* dst, const float4* src, int n) {
  const int stride = blockDim.x;
  int i = threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const float4 a = __ldg(src + i), b = __ldg(src + i + stride), c = __ldg(src + i + 2 * stride),
                 d = __ldg(src + i + 3 * stride);
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = __ldg(src + i);
}

// Shared memory (G = gates * H): Ws [I][G], Rs [H][G], bs [G], hs [B][H], cs [B][H], gs
// [B][G], then xs [chunk][B][G]: bias + x(t) . W of the next `chunk` steps, computed before
// them by every thread at once, so a step's serial part is h(t-1) . R and the gates. Gate rows
// are the columns of Ws and Rs, so the threads of a warp read consecutive words. gs holds xs +
// h(t-1) . R[r], except the GRU's n rows: h(t-1) . R_n alone (r * (it + bRn) comes first).
template <FusedRnnCell kCell>
__global__ void FusedRnnSmallKernel(FusedRnnSmallArgs p) {
  extern __shared__ float smem[];
  const FusedRnnArgs& a = p.a;
  const int H = a.H, I = p.I, B = a.B, G = kFusedGates<kCell> * a.H;
  float* Ws = smem;
  float* Rs = Ws + I * G;
  float* bs = Rs + H * G;
  float* hs = bs + G;
  float* cs = hs + B * H;
  float* gs = cs + B * H;
  float* xs = gs + B * G;
  // The weights in 16-byte loads, four in flight per thread: this prologue is latency-bound
  // (a load from device memory takes ~0.5 us), not bandwidth-bound.
  if ((I * G) % 4 == 0 && (H * G) % 4 == 0) {  // Ws and Rs start on 16-byte boundaries
    CopyToShared(reinterpret_cast<float4*>(Ws), reinterpret_cast<const float4*>(p.Wt), I * G / 4);
    CopyToShared(reinterpret_cast<float4*>(Rs), reinterpret_cast<const float4*>(p.Rt), H * G / 4);
  } else {  // a GRU's 3H gate rows times an odd width
    for (int i = threadIdx.x; i < I * G; i += blockDim.x) Ws[i] = __ldg(p.Wt + i);
    for (int i = threadIdx.x; i < H * G; i += blockDim.x) Rs[i] = __ldg(p.Rt + i);
  }
  for (int i = threadIdx.x; i < G; i += blockDim.x) bs[i] = p.bias[i];
  for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
    hs[i] = a.h0 ? a.h0[i] : 0.0f;
    cs[i] = a.c0 ? a.c0[i] : 0.0f;
  }
  for (int s0 = 0; s0 < a.steps; s0 += p.chunk) {
    const int n = min(p.chunk, a.steps - s0);
    __syncthreads();  // the weights are in; the last chunk's xs is consumed
    for (int d = threadIdx.x; d < n * B * G; d += blockDim.x) {
      const int t = s0 + d / (B * G), b = (d / G) % B, r = d % G;
      if (t >= a.lengths[b]) continue;
      const float* x = p.x + (static_cast<int64_t>(b) * a.T + t) * I;
      float acc = bs[r];
      for (int k = 0; k < I; ++k) acc = fmaf(__ldg(x + k), Ws[k * G + r], acc);
      xs[d] = acc;
    }
    __syncthreads();
    for (int s = s0; s < s0 + n; ++s) {
      // Every gate row of every sequence still running: xs + h(t-1) . R[r], in four partial
      // sums (independent FMA chains), added in a fixed order.
      for (int d = threadIdx.x; d < B * G; d += blockDim.x) {
        const int b = d / G, r = d % G;
        if (s >= a.lengths[b]) continue;
        const float* h = hs + b * H;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int k = 0;
        for (; k + 4 <= H; k += 4) {
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[q] = fmaf(h[k + q], Rs[(k + q) * G + r], acc[q]);
        }
        for (; k < H; ++k) acc[0] = fmaf(h[k], Rs[k * G + r], acc[0]);
        const float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        const bool n_row = kCell == FusedRnnCell::kGru && r >= 2 * H;
        gs[d] = n_row ? sum : xs[(s - s0) * B * G + d] + sum;
      }
      __syncthreads();
      for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
        const int b = i / H, j = i % H;
        const bool running = s < a.lengths[b];
        float h = hs[i];
        if (running) {
          const float* g = gs + b * G;
          if constexpr (kCell == FusedRnnCell::kLstm) {
            const float ig = FusedSigmoid(g[j]);
            const float fg = FusedSigmoid(g[H + j]);
            const float cg = tanhf(g[2 * H + j]);
            const float og = FusedSigmoid(g[3 * H + j]);
            const float c = fg * cs[i] + ig * cg;
            cs[i] = c;
            h = og * tanhf(c);
          } else {
            const float rg = FusedSigmoid(g[j]);
            const float zg = FusedSigmoid(g[H + j]);
            const float xn = xs[(s - s0) * B * G + b * G + 2 * H + j];
            const float ng = tanhf(xn + rg * (g[2 * H + j] + __ldg(a.bRn + j)));
            h = (1.0f - zg) * ng + zg * h;
          }
          hs[i] = h;
        }
        if (a.y) a.y[(static_cast<int64_t>(b) * a.T + s) * H + j] = running ? h : 0.0f;
      }
      __syncthreads();
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < B * H; i += blockDim.x) {
    const int b = i / H, j = i % H;
    a.hy[i] = hs[i];
    if (a.cy) a.cy[i] = cs[i];
    if (a.y) {
      for (int t = a.steps; t < a.T; ++t) a.y[(static_cast<int64_t>(b) * a.T + t) * H + j] = 0.0f;
    }
  }
}

}  // namespace

size_t FusedRnnSmallSmemBytes(FusedRnnCell cell, int B, int I, int H, int chunk) {
  const size_t G = FusedRnnGates(cell) * static_cast<size_t>(H);
  return sizeof(float) * (static_cast<size_t>(I) * G + static_cast<size_t>(H) * G + G +
                          2 * static_cast<size_t>(B) * H +
                          (1 + static_cast<size_t>(chunk)) * static_cast<size_t>(B) * G);
}

int FusedRnnSmallThreads(int B, int H) {
  // At least 512: the prologue's loads want many threads even when a step has little work.
  const int want = (4 * B * H + 31) / 32 * 32;
  return std::min(1024, std::max(512, want));
}

cudaError_t ConfigureFusedRnnSmallKernel(FusedRnnCell cell, size_t smem) {
  if (cell == FusedRnnCell::kLstm) {
    return RaiseDynamicSmemLimit(FusedRnnSmallKernel<FusedRnnCell::kLstm>, smem);
  }
  if (cell == FusedRnnCell::kGru) {
    return RaiseDynamicSmemLimit(FusedRnnSmallKernel<FusedRnnCell::kGru>, smem);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchFusedRnnSmallKernel(const FusedRnnSmallArgs& args, size_t smem,
                                      cudaStream_t stream) {
  const int threads = FusedRnnSmallThreads(args.a.B, args.a.H);
  if (args.a.cell == FusedRnnCell::kLstm) {
    FusedRnnSmallKernel<FusedRnnCell::kLstm><<<1, threads, smem, stream>>>(args);
  } else if (args.a.cell == FusedRnnCell::kGru) {
    FusedRnnSmallKernel<FusedRnnCell::kGru><<<1, threads, smem, stream>>>(args);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
