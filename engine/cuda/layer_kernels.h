#pragma once

// Kernels for the layers around the recurrent ones that keep a model on the device: Keras's
// normalisation, convolution, pooling and shape layers, and the generic tensor ops of ONNX
// graphs (layout copies, broadcast arithmetic, reductions). Each mirrors the CPU engine's
// function of the same layer (engine/cpu/norm_layers.cc, conv_pool.cc, shape_layers.cc,
// tensor_ops_*.cc) one for one, so both engines compute the same values.
//
// Plain C++ header (kernels in layer_kernels.cu). Every launcher enqueues on `stream` and
// returns the launch's cudaError_t; none synchronises.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

// Index arithmetic of a strided view: element i (row-major over dim[0..rank)) sits at
// sum over axes of idx[axis] * stride[axis].
inline constexpr int kMaxKernelRank = 8;
struct IndexMap {
  int rank = 0;
  int64_t dim[kMaxKernelRank] = {};
  int64_t stride[kMaxKernelRank] = {};
};

// y[r, c] = x[r, c] * scale[c] + shift[c] (inference batch normalisation, folded).
cudaError_t LaunchScaleShift(const float* x, float* y, const float* scale, const float* shift,
                             int64_t rows, int cols, cudaStream_t stream);

// Layer normalisation of each row of x [rows, cols] into y (mean and variance in double, two
// passes); gamma/beta may be null (1 and 0).
cudaError_t LaunchLayerNorm(const float* x, float* y, const float* gamma, const float* beta,
                            int64_t rows, int cols, float epsilon, cudaStream_t stream);

// Softmax (or log-softmax) of y viewed as [outer, n, inner] over n, in place. `double_sum`
// accumulates the denominator in double (the ONNX ops), else in float (Keras).
cudaError_t LaunchSoftmaxAxis(float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                              bool double_sum, cudaStream_t stream);

// Conv1D windows: cols [B*out_len, K*Cin], zeros where a window hangs over the padding.
cudaError_t LaunchIm2Col1D(const float* x, float* cols, int64_t B, int64_t T, int64_t cin,
                           int64_t out_len, int64_t K, int64_t stride, int64_t dilation,
                           int64_t pad_left, cudaStream_t stream);

// Max/average pooling over time: y [B, out_len, C]; padding takes no part.
cudaError_t LaunchPool1D(const float* x, float* y, int64_t B, int64_t T, int64_t C, int64_t out_len,
                         int64_t pool, int64_t stride, int64_t pad_left, bool max,
                         cudaStream_t stream);

// Global max/average pooling over time: y [B, C]. Average counts only valid steps (lengths
// [B] and step_mask [B, T], each may be null); a sequence with none gives zeros. Max reads
// every step (as Keras's GlobalMaxPooling1D, which ignores the mask).
cudaError_t LaunchGlobalPool1D(const float* x, float* y, int64_t B, int64_t T, int64_t C,
                               const int32_t* lengths, const uint8_t* step_mask, bool max,
                               cudaStream_t stream);

// out[i] = in[offset + map(i)] for i < n (n = product of map.dim).
cudaError_t LaunchStridedCopy(const float* in, int64_t offset, const IndexMap& map, float* out,
                              cudaStream_t stream);

// Elementwise ops with broadcasting. Values of BinaryOp mirror the math of
// the CPU engine's tensor-op arithmetic (engine/cpu/tensor_ops_math.cc) and Keras's merges.
enum class BinaryOp { kAdd = 0, kSub, kMul, kDiv, kPow, kMin, kMax };
// out[i] = op(a[map_a(i)], b[map_b(i)]); map_a and map_b share dim (the output's shape).
cudaError_t LaunchBinary(const float* a, const IndexMap& map_a, const float* b,
                         const IndexMap& map_b, float* out, BinaryOp op, cudaStream_t stream);

enum class UnaryOp { kActivation = 0, kNeg, kAbs, kSqrt, kExp, kLog, kReciprocal, kDivBy };
// out[i] = op(in[i]); kActivation applies `act` (not softmax), kDivBy divides by `scalar`.
cudaError_t LaunchUnary(const float* in, float* out, int64_t n, UnaryOp op, DeviceActivation act,
                        float scalar, cudaStream_t stream);

// out[(o*ni + j)*inner + k] = x[(o*n + indices[j])*inner + k]; indices in [0, n).
cudaError_t LaunchGather(const float* x, const int64_t* indices, float* out, int64_t outer,
                         int64_t n, int64_t ni, int64_t inner, cudaStream_t stream);

// The request-lengths ops (engine/ir.h kGatherAtLengths, kZeroPastLengths) over x viewed as
// [outer, n0, mid, n1, inner], the batch and time axes at n0 and n1 (time first when
// time_first); lengths [B] on the device. Gather: out = x with the time axis of size 1, holding
// each sequence's step max(lengths[b] - 1, 0). Zero: out = x with the steps at or past each
// sequence's length set to 0.
cudaError_t LaunchGatherAtLengths(const float* x, const int32_t* lengths, float* out, int64_t outer,
                                  int64_t n0, int64_t mid, int64_t n1, int64_t inner,
                                  bool time_first, cudaStream_t stream);
cudaError_t LaunchZeroPastLengths(const float* x, const int32_t* lengths, float* out, int64_t outer,
                                  int64_t n0, int64_t mid, int64_t n1, int64_t inner,
                                  bool time_first, cudaStream_t stream);

enum class ReduceOp { kSum = 0, kMean, kMax };
// out[o] = reduce over r of x[kept(o) + reduced(r)], accumulated in double; `count` is the
// number of reduced elements (product of reduced.dim).
cudaError_t LaunchReduce(const float* x, const IndexMap& kept, const IndexMap& reduced,
                         int64_t count, float* out, ReduceOp op, cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
