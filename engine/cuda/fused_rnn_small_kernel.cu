// The one-block LSTM and GRU (reset_after) kernel of FusedRnn for small H (fused_rnn_kernel.h).
// Plain FP32: FMAs and precise expf / tanhf, as the CPU engine computes them.

#include <algorithm>

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

// The threads of the kernel that keeps R's rows in registers (kH 32, 64): enough for every
// gate row (4 * 64), few enough for a row's 64 weights each.
constexpr int kSmallRegisterThreads = 512;

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
// kH (32 or 64; 0: any H): thread r < G keeps gate row r of R in registers and computes that row
// for every sequence, reading h as float4 broadcasts, instead of reading a weight from shared
// memory for every FMA (which bounded the step); the same sums in the same order.
template <FusedRnnCell kCell, int kH>
__global__ void __launch_bounds__(kH > 0 ? kSmallRegisterThreads : 1024)
    FusedRnnSmallKernel(FusedRnnSmallArgs p) {
  extern __shared__ float smem[];
  const FusedRnnArgs& a = p.a;
  const int H = a.H, I = p.I, B = a.B, G = kFusedGates<kCell> * a.H;
  float* Ws = smem;
  float* Rs = Ws + I * G;  // kH: none (R is in registers)
  float* bs = Rs + (kH > 0 ? 0 : H * G);
  float* hs = bs + G;
  float* cs = hs + B * H;
  float* gs = cs + B * H;
  float* xs = gs + B * G;
  // The weights in 16-byte loads, four in flight per thread: this prologue is latency-bound
  // (a load from device memory takes ~0.5 us), not bandwidth-bound.
  const int rs_size = kH > 0 ? 0 : H * G;
  if ((I * G) % 4 == 0 && (H * G) % 4 == 0) {  // Ws and Rs start on 16-byte boundaries
    CopyToShared(reinterpret_cast<float4*>(Ws), reinterpret_cast<const float4*>(p.Wt), I * G / 4);
    CopyToShared(reinterpret_cast<float4*>(Rs), reinterpret_cast<const float4*>(p.Rt), rs_size / 4);
  } else {  // a GRU's 3H gate rows times an odd width
    for (int i = threadIdx.x; i < I * G; i += blockDim.x) Ws[i] = __ldg(p.Wt + i);
    for (int i = threadIdx.x; i < rs_size; i += blockDim.x) Rs[i] = __ldg(p.Rt + i);
  }
  for (int i = threadIdx.x; i < G; i += blockDim.x) bs[i] = p.bias[i];
  float rr[kH > 0 ? kH : 1];  // kH: this thread's gate row of R
  if constexpr (kH > 0) {
    if (threadIdx.x < G) {
#pragma unroll
      for (int k = 0; k < kH; ++k) rr[k] = __ldg(p.Rt + k * G + threadIdx.x);
    }
  }
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
      // Four partial sums (independent FMA chains, their loads in flight together), added in
      // a fixed order, then the bias.
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int k = 0;
      for (; k + 4 <= I; k += 4) {
#pragma unroll
        for (int q = 0; q < 4; ++q) part[q] = fmaf(__ldg(x + k + q), Ws[(k + q) * G + r], part[q]);
      }
      for (; k < I; ++k) part[0] = fmaf(__ldg(x + k), Ws[k * G + r], part[0]);
      xs[d] = bs[r] + ((part[0] + part[1]) + (part[2] + part[3]));
    }
    __syncthreads();
    for (int s = s0; s < s0 + n; ++s) {
      // Every gate row of every sequence still running: xs + h(t-1) . R[r], in four partial
      // sums (independent FMA chains), added in a fixed order.
      if constexpr (kH > 0) {
        const int r = threadIdx.x;
        const bool n_row = kCell == FusedRnnCell::kGru && r >= 2 * kH;
        for (int b = 0; r < G && b < B; ++b) {
          if (s >= a.lengths[b]) continue;
          const float4* h4 = reinterpret_cast<const float4*>(hs + b * kH);
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int k = 0; k < kH; k += 4) {
            const float4 hv = h4[k / 4];
            acc[0] = fmaf(hv.x, rr[k], acc[0]);
            acc[1] = fmaf(hv.y, rr[k + 1], acc[1]);
            acc[2] = fmaf(hv.z, rr[k + 2], acc[2]);
            acc[3] = fmaf(hv.w, rr[k + 3], acc[3]);
          }
          const float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
          const int d = b * G + r;
          gs[d] = n_row ? sum : xs[(s - s0) * B * G + d] + sum;
        }
      } else {
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
  const size_t Rs = FusedRnnSmallRegisterRows(H) ? 0 : static_cast<size_t>(H) * G;
  return sizeof(float) * (static_cast<size_t>(I) * G + Rs + G + 2 * static_cast<size_t>(B) * H +
                          (1 + static_cast<size_t>(chunk)) * static_cast<size_t>(B) * G);
}

int FusedRnnSmallThreads(int B, int H) {
  if (FusedRnnSmallRegisterRows(H)) return kSmallRegisterThreads;
  // At least 512: the prologue's loads want many threads even when a step has little work.
  const int want = (4 * B * H + 31) / 32 * 32;
  return std::min(1024, std::max(512, want));
}

namespace {

using SmallKernel = void (*)(FusedRnnSmallArgs);

template <FusedRnnCell kCell>
SmallKernel SmallKernelOf(int H) {  // FusedRnnSmallRegisterRows' widths, or any H
  if (H == 32) return FusedRnnSmallKernel<kCell, 32>;
  if (H == 64) return FusedRnnSmallKernel<kCell, 64>;
  return FusedRnnSmallKernel<kCell, 0>;
}

SmallKernel SmallKernelFor(FusedRnnCell cell, int H) {
  if (cell == FusedRnnCell::kLstm) return SmallKernelOf<FusedRnnCell::kLstm>(H);
  if (cell == FusedRnnCell::kGru) return SmallKernelOf<FusedRnnCell::kGru>(H);
  return nullptr;
}

}  // namespace

cudaError_t ConfigureFusedRnnSmallKernel(FusedRnnCell cell, int H, size_t smem) {
  SmallKernel k = SmallKernelFor(cell, H);
  return k ? RaiseDynamicSmemLimit(k, smem) : cudaErrorInvalidValue;
}

cudaError_t LaunchFusedRnnSmallKernel(const FusedRnnSmallArgs& args, size_t smem,
                                      cudaStream_t stream) {
  SmallKernel k = SmallKernelFor(args.a.cell, args.a.H);
  if (!k) return cudaErrorInvalidValue;
  k<<<1, FusedRnnSmallThreads(args.a.B, args.a.H), smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
