// Kernels of the GPU engine (see kernels.h). Elementwise kernels use grid-stride loops; the
// activation formulas mirror engine/cpu/activation.h one for one, so both engines compute the
// same function.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "engine/cuda/device_activation.cuh"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

__global__ void BiasActivationKernel(float* y, const float* bias, int64_t n, int cols,
                                     DeviceActivation act) {
  RNNSERVE_GRID_LOOP(i, n) {
    float v = y[i];
    if (bias != nullptr) v += bias[i % cols];
    y[i] = Activate(act, v);
  }
}

__global__ void MoveRowsKernel(const float* src, const int32_t* src_rows, float* dst,
                               const int32_t* dst_rows, int64_t n, int width) {
  RNNSERVE_GRID_LOOP(i, n * width) {
    const int64_t j = i / width, k = i % width;
    const int64_t to = (dst_rows != nullptr ? dst_rows[j] : j) * int64_t{width} + k;
    dst[to] =
        src == nullptr ? 0.0f : src[(src_rows != nullptr ? src_rows[j] : j) * int64_t{width} + k];
  }
}

// One block per row; the block reduces max and sum in shared memory.
__global__ void SoftmaxKernel(float* y, int cols) {
  __shared__ float red[kThreads];
  float* row = y + blockIdx.x * int64_t{cols};
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = BlockReduce(m, red, [](float a, float b) { return fmaxf(a, b); });
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = expf(row[c] - m);
    row[c] = e;
    sum += e;
  }
  const float total = BlockReduce(sum, red, [](float a, float b) { return a + b; });
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] /= total;
}

__global__ void EmbeddingKernel(const int64_t* ids, const float* table, float* out, int64_t n,
                                int dim) {
  RNNSERVE_GRID_LOOP(i, n * dim) {
    const int64_t r = i / dim;
    out[i] = table[ids[r] * dim + (i % dim)];
  }
}

__global__ void RepeatLastKernel(float* y, const float* last, const int32_t* lengths, int B, int T,
                                 int row, int offset, int width) {
  const int64_t n = int64_t{B} * T * width;
  RNNSERVE_GRID_LOOP(i, n) {
    const int j = static_cast<int>(i % width);
    const int64_t bt = i / width;
    const int t = static_cast<int>(bt % T);
    const int b = static_cast<int>(bt / T);
    if (t >= lengths[b]) y[bt * row + offset + j] = last[int64_t{b} * width + j];
  }
}

__global__ void MergeKernel(const float* a, int64_t sa, const float* b, int64_t sb, float* out,
                            int64_t rows, int width, int op) {
  RNNSERVE_GRID_LOOP(i, rows * width) {
    const int64_t r = i / width;
    const int j = static_cast<int>(i % width);
    const float va = a[r * sa + j], vb = b[r * sb + j];
    switch (op) {
      case 0:
        out[r * 2 * width + j] = va;
        out[r * 2 * width + width + j] = vb;
        break;
      case 1:
        out[i] = va + vb;
        break;
      case 2:
        out[i] = va * vb;
        break;
      default:
        out[i] = 0.5f * (va + vb);
        break;
    }
  }
}

// Four half values: one 8-byte load or store.
template <typename H>
struct alignas(8) Half4 {
  H v[4];
};
template <typename H>
__device__ __forceinline__ H ToHalfValue(float x);
template <>
__device__ __forceinline__ __half ToHalfValue<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 ToHalfValue<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// out [B, A, C] = in [A, B, C], converting element types, in groups of V (1 or 4) along C.
template <typename In, typename Out, int V>
__global__ void Swap01Kernel(const In* in, Out* out, int64_t A, int64_t B, int64_t C) {
  const int64_t cv = C / V;
  const int64_t n = A * B * cv;
  RNNSERVE_GRID_LOOP(i, n) {
    const int64_t c = (i % cv) * V;
    const int64_t ba = i / cv;  // output row: b * A + a
    const int64_t a = ba % A, b = ba / A;
    const In* src = in + (a * B + b) * C + c;
    Out* dst = out + ba * C + c;
    if constexpr (V == 4) {
      float f[4];
      if constexpr (std::is_same_v<In, float>) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
      } else {
        const Half4<In> h = *reinterpret_cast<const Half4<In>*>(src);
        for (int k = 0; k < 4; ++k) f[k] = static_cast<float>(h.v[k]);
      }
      if constexpr (std::is_same_v<Out, float>) {
        *reinterpret_cast<float4*>(dst) = make_float4(f[0], f[1], f[2], f[3]);
      } else {
        Half4<Out> h;
        for (int k = 0; k < 4; ++k) h.v[k] = ToHalfValue<Out>(f[k]);
        *reinterpret_cast<Half4<Out>*>(dst) = h;
      }
    } else if constexpr (std::is_same_v<Out, float>) {
      *dst = static_cast<float>(*src);
    } else {
      *dst = ToHalfValue<Out>(*src);
    }
  }
}

}  // namespace

cudaError_t LaunchBiasActivation(float* y, const float* bias, int64_t rows, int cols,
                                 DeviceActivation act, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0 || (bias == nullptr && act.kind == kLinear)) return cudaSuccess;
  BiasActivationKernel<<<Blocks(n), kThreads, 0, stream>>>(y, bias, n, cols, act);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxRows(float* y, int64_t rows, int cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  // One block per row; rows beyond the grid limit are handled in chunks.
  for (int64_t r0 = 0; r0 < rows; r0 += 65535 * 32) {
    const int64_t chunk = rows - r0 < 65535 * 32 ? rows - r0 : 65535 * 32;
    SoftmaxKernel<<<static_cast<unsigned>(chunk), kThreads, 0, stream>>>(y + r0 * cols, cols);
    if (auto e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t LaunchEmbedding(const int64_t* ids, const float* table, float* out, int64_t n, int dim,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  EmbeddingKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(ids, table, out, n, dim);
  return cudaGetLastError();
}

cudaError_t LaunchRepeatLastOutput(float* y, const float* last, const int32_t* lengths, int B,
                                   int T, int row, int offset, int width, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T * width;
  if (n == 0) return cudaSuccess;
  RepeatLastKernel<<<Blocks(n), kThreads, 0, stream>>>(y, last, lengths, B, T, row, offset, width);
  return cudaGetLastError();
}

cudaError_t LaunchMoveRows(const float* src, const int32_t* src_rows, float* dst,
                           const int32_t* dst_rows, int64_t n, int width, cudaStream_t stream) {
  const int64_t total = n * width;
  if (total == 0) return cudaSuccess;
  MoveRowsKernel<<<Blocks(total), kThreads, 0, stream>>>(src, src_rows, dst, dst_rows, n, width);
  return cudaGetLastError();
}

cudaError_t LaunchMerge(const float* a, int64_t stride_a, const float* b, int64_t stride_b,
                        float* out, int64_t rows, int width, MergeOp op, cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n == 0) return cudaSuccess;
  MergeKernel<<<Blocks(n), kThreads, 0, stream>>>(a, stride_a, b, stride_b, out, rows, width,
                                                  static_cast<int>(op));
  return cudaGetLastError();
}

namespace {

template <typename In, typename Out>
cudaError_t Swap01Typed(const In* in, Out* out, int64_t A, int64_t B, int64_t C,
                        cudaStream_t stream) {
  const int64_t n = A * B * C;
  if (n == 0) return cudaSuccess;
  // Every row starts 16-byte aligned for FP32 (8 for half) when C is a multiple of 4.
  const bool v4 = C % 4 == 0 && reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (v4) {
    Swap01Kernel<In, Out, 4><<<Blocks(n / 4), kThreads, 0, stream>>>(in, out, A, B, C);
  } else {
    Swap01Kernel<In, Out, 1><<<Blocks(n), kThreads, 0, stream>>>(in, out, A, B, C);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchToHalfSwap01(const float* in, void* out, int64_t A, int64_t B, int64_t C,
                               HalfKind kind, cudaStream_t stream) {
  return kind == HalfKind::kFp16
             ? Swap01Typed(in, static_cast<__half*>(out), A, B, C, stream)
             : Swap01Typed(in, static_cast<__nv_bfloat16*>(out), A, B, C, stream);
}

cudaError_t LaunchFromHalfSwap01(const void* in, float* out, int64_t A, int64_t B, int64_t C,
                                 HalfKind kind, cudaStream_t stream) {
  return kind == HalfKind::kFp16
             ? Swap01Typed(static_cast<const __half*>(in), out, A, B, C, stream)
             : Swap01Typed(static_cast<const __nv_bfloat16*>(in), out, A, B, C, stream);
}

cudaError_t LaunchSwap01(const float* in, float* out, int64_t A, int64_t B, int64_t C,
                         cudaStream_t stream) {
  return Swap01Typed(in, out, A, B, C, stream);
}

// A plain conversion is the swap of two axes of size 1.
cudaError_t LaunchToHalf(const float* in, void* out, int64_t n, HalfKind kind,
                         cudaStream_t stream) {
  return LaunchToHalfSwap01(in, out, 1, 1, n, kind, stream);
}

cudaError_t LaunchFromHalf(const void* in, float* out, int64_t n, HalfKind kind,
                           cudaStream_t stream) {
  return LaunchFromHalfSwap01(in, out, 1, 1, n, kind, stream);
}

}  // namespace rnnserve::engine::cuda
