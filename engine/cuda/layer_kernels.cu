// Kernels of layer_kernels.h. Elementwise kernels use grid-stride loops over the output.

#include <cmath>

#include "engine/cuda/device_activation.cuh"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/layer_kernels.h"

namespace rnnserve::engine::cuda {
namespace {

constexpr int kBlock = kThreads;

int64_t Count(const IndexMap& m) {
  int64_t n = 1;
  for (int a = 0; a < m.rank; ++a) n *= m.dim[a];
  return n;
}

__device__ __forceinline__ int64_t Offset(const IndexMap& m, int64_t i) {
  int64_t off = 0;
  for (int a = m.rank - 1; a >= 0; --a) {
    const int64_t d = m.dim[a];
    off += (i % d) * m.stride[a];
    i /= d;
  }
  return off;
}

__global__ void ScaleShiftKernel(const float* x, float* y, const float* scale, const float* shift,
                                 int64_t n, int cols) {
  RNNSERVE_GRID_LOOP(i, n) {
    const int c = static_cast<int>(i % cols);
    y[i] = x[i] * scale[c] + shift[c];
  }
}

__global__ void LayerNormKernel(const float* x, float* y, const float* gamma, const float* beta,
                                int cols, float epsilon) {
  __shared__ double red[kBlock];
  const float* row = x + blockIdx.x * int64_t{cols};
  float* out = y + blockIdx.x * int64_t{cols};
  double sum = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  const auto add = [](double a, double b) { return a + b; };
  // One block per row; double partial sums reduced in shared memory.
  const double mean = BlockReduce(sum, red, add) / static_cast<double>(cols);
  double sq = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sq += (row[c] - mean) * (row[c] - mean);
  const double var = BlockReduce(sq, red, add) / static_cast<double>(cols);
  const double inv = 1.0 / sqrt(var + static_cast<double>(epsilon));
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double g = gamma != nullptr ? gamma[c] : 1.0;
    const double b = beta != nullptr ? beta[c] : 0.0;
    out[c] = static_cast<float>((row[c] - mean) * inv * g + b);
  }
}

// One thread per (outer, inner) pair, walking n.
__global__ void SoftmaxAxisKernel(float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                                  bool double_sum) {
  RNNSERVE_GRID_LOOP(p, outer * inner) {
    float* base = y + (p / inner) * n * inner + (p % inner);
    float m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = fmaxf(m, base[k * inner]);
    if (double_sum) {
      double sum = 0.0;
      for (int64_t k = 0; k < n; ++k) sum += expf(base[k * inner] - m);
      for (int64_t k = 0; k < n; ++k) {
        const float z = base[k * inner] - m;
        base[k * inner] = log ? z - static_cast<float>(::log(sum))
                              : static_cast<float>(static_cast<double>(expf(z)) / sum);
      }
    } else {
      float sum = 0.0f;
      for (int64_t k = 0; k < n; ++k) {
        base[k * inner] = expf(base[k * inner] - m);
        sum += base[k * inner];
      }
      const float inv = 1.0f / sum;
      for (int64_t k = 0; k < n; ++k) base[k * inner] *= inv;
    }
  }
}

__global__ void Im2ColKernel(const float* x, float* cols, int64_t B, int64_t T, int64_t cin,
                             int64_t out_len, int64_t K, int64_t stride, int64_t dilation,
                             int64_t pad_left) {
  const int64_t width = K * cin;
  RNNSERVE_GRID_LOOP(i, B * out_len * width) {
    const int64_t c = i % cin;
    const int64_t k = (i / cin) % K;
    const int64_t bp = i / width;
    const int64_t p = bp % out_len, b = bp / out_len;
    const int64_t t = p * stride + k * dilation - pad_left;
    cols[i] = (t >= 0 && t < T) ? x[(b * T + t) * cin + c] : 0.0f;
  }
}

__global__ void Pool1DKernel(const float* x, float* y, int64_t B, int64_t T, int64_t C,
                             int64_t out_len, int64_t pool, int64_t stride, int64_t pad_left,
                             bool max) {
  RNNSERVE_GRID_LOOP(i, B * out_len * C) {
    const int64_t c = i % C;
    const int64_t p = (i / C) % out_len, b = i / (C * out_len);
    const int64_t start = p * stride - pad_left;
    const int64_t t0 = start > 0 ? start : 0;
    const int64_t t1 = start + pool < T ? start + pool : T;
    float acc = max ? -INFINITY : 0.0f;
    for (int64_t t = t0; t < t1; ++t) {
      const float v = x[(b * T + t) * C + c];
      acc = max ? fmaxf(acc, v) : acc + v;
    }
    y[i] = max ? acc : acc / static_cast<float>(t1 - t0);
  }
}

__global__ void GlobalPoolKernel(const float* x, float* y, int64_t B, int64_t T, int64_t C,
                                 const int32_t* lengths, const uint8_t* step_mask, bool max) {
  RNNSERVE_GRID_LOOP(i, B * C) {
    const int64_t b = i / C, c = i % C;
    const int64_t len = (max || lengths == nullptr) ? T : lengths[b];
    const uint8_t* valid = (max || step_mask == nullptr) ? nullptr : step_mask + b * T;
    float acc = max ? -INFINITY : 0.0f;
    int64_t count = 0;
    for (int64_t t = 0; t < len; ++t) {
      if (valid != nullptr && !valid[t]) continue;
      ++count;
      const float v = x[(b * T + t) * C + c];
      acc = max ? (acc < v ? v : acc) : acc + v;
    }
    if (!max) acc *= count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
    y[i] = acc;
  }
}

__global__ void StridedCopyKernel(const float* in, int64_t offset, IndexMap map, float* out,
                                  int64_t n) {
  RNNSERVE_GRID_LOOP(i, n) { out[i] = in[offset + Offset(map, i)]; }
}

__device__ __forceinline__ float ApplyBinary(int op, float x, float y) {
  switch (op) {
    case 0:
      return x + y;
    case 1:
      return x - y;
    case 2:
      return x * y;
    case 3:
      return x / y;
    case 4:
      return static_cast<float>(pow(static_cast<double>(x), static_cast<double>(y)));
    case 5:
      return y < x ? y : x;  // std::min
    default:
      return x < y ? y : x;  // std::max
  }
}

__global__ void BinaryKernel(const float* a, IndexMap ma, const float* b, IndexMap mb, float* out,
                             int64_t n, int op) {
  RNNSERVE_GRID_LOOP(i, n) { out[i] = ApplyBinary(op, a[Offset(ma, i)], b[Offset(mb, i)]); }
}

__global__ void UnaryKernel(const float* in, float* out, int64_t n, int op, DeviceActivation act,
                            float scalar) {
  RNNSERVE_GRID_LOOP(i, n) {
    const float x = in[i];
    float v;
    switch (op) {
      case 0:
        v = Activate(act, x);
        break;
      case 1:
        v = -x;
        break;
      case 2:
        v = fabsf(x);
        break;
      case 3:
        v = sqrtf(x);
        break;
      case 4:
        v = expf(x);
        break;
      case 5:
        v = logf(x);
        break;
      case 6:
        v = 1.0f / x;
        break;
      default:
        v = x / scalar;
        break;
    }
    out[i] = v;
  }
}

__global__ void GatherKernel(const float* x, const int64_t* indices, float* out, int64_t outer,
                             int64_t n, int64_t ni, int64_t inner) {
  RNNSERVE_GRID_LOOP(i, outer * ni * inner) {
    const int64_t k = i % inner;
    const int64_t j = (i / inner) % ni;
    const int64_t o = i / (inner * ni);
    out[i] = x[(o * n + indices[j]) * inner + k];
  }
}

// Output element i of [outer, o0, mid, o1, inner] (o0, o1: n0, n1 with the time one 1).
__global__ void GatherAtLengthsKernel(const float* x, const int32_t* lengths, float* out,
                                      int64_t outer, int64_t n0, int64_t mid, int64_t n1,
                                      int64_t inner, bool time_first) {
  const int64_t o0 = time_first ? 1 : n0, o1 = time_first ? n1 : 1;
  RNNSERVE_GRID_LOOP(i, outer * o0 * mid * o1 * inner) {
    int64_t rest = i;
    const int64_t k = rest % inner;
    rest /= inner;
    const int64_t j1 = rest % o1;
    rest /= o1;
    const int64_t m = rest % mid;
    rest /= mid;
    const int64_t j0 = rest % o0;
    const int64_t o = rest / o0;
    const int64_t b = time_first ? j1 : j0;
    const int64_t t = lengths[b] > 0 ? lengths[b] - 1 : 0;
    const int64_t i0 = time_first ? t : j0, i1 = time_first ? j1 : t;
    out[i] = x[(((o * n0 + i0) * mid + m) * n1 + i1) * inner + k];
  }
}

__global__ void ZeroPastLengthsKernel(const float* x, const int32_t* lengths, float* out,
                                      int64_t outer, int64_t n0, int64_t mid, int64_t n1,
                                      int64_t inner, bool time_first) {
  RNNSERVE_GRID_LOOP(i, outer * n0 * mid * n1 * inner) {
    const int64_t rest = i / inner;
    const int64_t i1 = rest % n1;
    const int64_t i0 = (rest / (n1 * mid)) % n0;
    const int64_t b = time_first ? i1 : i0, t = time_first ? i0 : i1;
    out[i] = t < lengths[b] ? x[i] : 0.0f;
  }
}

__global__ void ReduceKernel(const float* x, IndexMap kept, IndexMap reduced, int64_t count,
                             float* out, int64_t n, int op) {
  RNNSERVE_GRID_LOOP(o, n) {
    const int64_t base = Offset(kept, o);
    double acc = op == 2 ? -INFINITY : 0.0;
    for (int64_t r = 0; r < count; ++r) {
      const double v = x[base + Offset(reduced, r)];
      acc = op == 2 ? (acc < v ? v : acc) : acc + v;
    }
    if (op == 1 && count > 0) acc /= static_cast<double>(count);
    out[o] = static_cast<float>(acc);
  }
}

}  // namespace

cudaError_t LaunchScaleShift(const float* x, float* y, const float* scale, const float* shift,
                             int64_t rows, int cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  ScaleShiftKernel<<<Blocks(n), kBlock, 0, stream>>>(x, y, scale, shift, n, cols);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(const float* x, float* y, const float* gamma, const float* beta,
                            int64_t rows, int cols, float epsilon, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  for (int64_t r0 = 0; r0 < rows; r0 += 65535 * 32) {
    const int64_t chunk = rows - r0 < 65535 * 32 ? rows - r0 : 65535 * 32;
    LayerNormKernel<<<static_cast<unsigned>(chunk), kBlock, 0, stream>>>(
        x + r0 * cols, y + r0 * cols, gamma, beta, cols, epsilon);
    if (auto e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t LaunchSoftmaxAxis(float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                              bool double_sum, cudaStream_t stream) {
  if (outer * inner == 0 || n == 0) return cudaSuccess;
  if (inner == 1 && !log && !double_sum && n <= (int64_t{1} << 30)) {
    return LaunchSoftmaxRows(y, outer, static_cast<int>(n), stream);  // one block per row
  }
  SoftmaxAxisKernel<<<Blocks(outer * inner), kBlock, 0, stream>>>(y, outer, n, inner, log,
                                                                  double_sum);
  return cudaGetLastError();
}

cudaError_t LaunchIm2Col1D(const float* x, float* cols, int64_t B, int64_t T, int64_t cin,
                           int64_t out_len, int64_t K, int64_t stride, int64_t dilation,
                           int64_t pad_left, cudaStream_t stream) {
  const int64_t n = B * out_len * K * cin;
  if (n == 0) return cudaSuccess;
  Im2ColKernel<<<Blocks(n), kBlock, 0, stream>>>(x, cols, B, T, cin, out_len, K, stride, dilation,
                                                 pad_left);
  return cudaGetLastError();
}

cudaError_t LaunchPool1D(const float* x, float* y, int64_t B, int64_t T, int64_t C, int64_t out_len,
                         int64_t pool, int64_t stride, int64_t pad_left, bool max,
                         cudaStream_t stream) {
  const int64_t n = B * out_len * C;
  if (n == 0) return cudaSuccess;
  Pool1DKernel<<<Blocks(n), kBlock, 0, stream>>>(x, y, B, T, C, out_len, pool, stride, pad_left,
                                                 max);
  return cudaGetLastError();
}

cudaError_t LaunchGlobalPool1D(const float* x, float* y, int64_t B, int64_t T, int64_t C,
                               const int32_t* lengths, const uint8_t* step_mask, bool max,
                               cudaStream_t stream) {
  if (B * C == 0) return cudaSuccess;
  GlobalPoolKernel<<<Blocks(B * C), kBlock, 0, stream>>>(x, y, B, T, C, lengths, step_mask, max);
  return cudaGetLastError();
}

cudaError_t LaunchStridedCopy(const float* in, int64_t offset, const IndexMap& map, float* out,
                              cudaStream_t stream) {
  const int64_t n = Count(map);
  if (n == 0) return cudaSuccess;
  StridedCopyKernel<<<Blocks(n), kBlock, 0, stream>>>(in, offset, map, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBinary(const float* a, const IndexMap& map_a, const float* b,
                         const IndexMap& map_b, float* out, BinaryOp op, cudaStream_t stream) {
  const int64_t n = Count(map_a);
  if (n == 0) return cudaSuccess;
  BinaryKernel<<<Blocks(n), kBlock, 0, stream>>>(a, map_a, b, map_b, out, n, static_cast<int>(op));
  return cudaGetLastError();
}

cudaError_t LaunchUnary(const float* in, float* out, int64_t n, UnaryOp op, DeviceActivation act,
                        float scalar, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<<<Blocks(n), kBlock, 0, stream>>>(in, out, n, static_cast<int>(op), act, scalar);
  return cudaGetLastError();
}

cudaError_t LaunchGather(const float* x, const int64_t* indices, float* out, int64_t outer,
                         int64_t n, int64_t ni, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * ni * inner;
  if (total == 0) return cudaSuccess;
  GatherKernel<<<Blocks(total), kBlock, 0, stream>>>(x, indices, out, outer, n, ni, inner);
  return cudaGetLastError();
}

cudaError_t LaunchGatherAtLengths(const float* x, const int32_t* lengths, float* out, int64_t outer,
                                  int64_t n0, int64_t mid, int64_t n1, int64_t inner,
                                  bool time_first, cudaStream_t stream) {
  const int64_t total = outer * (time_first ? n1 : n0) * mid * inner;
  if (total == 0) return cudaSuccess;
  GatherAtLengthsKernel<<<Blocks(total), kBlock, 0, stream>>>(x, lengths, out, outer, n0, mid, n1,
                                                              inner, time_first);
  return cudaGetLastError();
}

cudaError_t LaunchZeroPastLengths(const float* x, const int32_t* lengths, float* out, int64_t outer,
                                  int64_t n0, int64_t mid, int64_t n1, int64_t inner,
                                  bool time_first, cudaStream_t stream) {
  const int64_t total = outer * n0 * mid * n1 * inner;
  if (total == 0) return cudaSuccess;
  ZeroPastLengthsKernel<<<Blocks(total), kBlock, 0, stream>>>(x, lengths, out, outer, n0, mid, n1,
                                                              inner, time_first);
  return cudaGetLastError();
}

cudaError_t LaunchReduce(const float* x, const IndexMap& kept, const IndexMap& reduced,
                         int64_t count, float* out, ReduceOp op, cudaStream_t stream) {
  const int64_t n = Count(kept);
  if (n == 0) return cudaSuccess;
  ReduceKernel<<<Blocks(n), kBlock, 0, stream>>>(x, kept, reduced, count, out, n,
                                                 static_cast<int>(op));
  return cudaGetLastError();
}

}  // namespace rnnserve::engine::cuda
