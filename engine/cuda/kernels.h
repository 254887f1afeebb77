#pragma once

// The GPU engine's own small kernels: everything around cuDNN's recurrent layers that keeps a
// model on the device (bias + activation after a cuBLAS GEMM, softmax, embedding lookup, Keras's
// masked-step outputs, bidirectional merges, precision conversion).
//
// This header is plain C++ so that host code compiled by the C++ compiler can include it; the
// kernels live in kernels.cu. Every launcher enqueues on `stream` and returns the launch's
// cudaError_t (cudaGetLastError), never synchronising.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rnnserve::engine::cuda {

// Mirrors engine::ActivationKind's values (checked by a static_assert in cuda_engine.cc).
struct DeviceActivation {
  int kind = 0;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// y[r, c] = act(y[r, c] + bias[c]) for r < rows, c < cols; bias may be null. Not softmax.
cudaError_t LaunchBiasActivation(float* y, const float* bias, int64_t rows, int cols,
                                 DeviceActivation act, cudaStream_t stream);

// Numerically stable softmax over each row of y [rows, cols], in place.
cudaError_t LaunchSoftmaxRows(float* y, int64_t rows, int cols, cudaStream_t stream);

// out[i, :] = table[ids[i], :] for i < n; ids already validated in [0, vocab).
cudaError_t LaunchEmbedding(const int64_t* ids, const float* table, float* out, int64_t n, int dim,
                            cudaStream_t stream);

// Keras masking for one direction of a batch-major sequence output y [B, T, row]: at every step
// t >= lengths[b], y[b, t, offset : offset + width] = last[b, :] (the layer's final output).
cudaError_t LaunchRepeatLastOutput(float* y, const float* last, const int32_t* lengths, int B,
                                   int T, int row, int offset, int width, cudaStream_t stream);

// Row moves of `width` floats for j < n: dst[dst_rows ? dst_rows[j] : j, :] =
// src[src_rows ? src_rows[j] : j, :], or zeros when src is null. A gather (src_rows), a scatter
// (dst_rows), or zeroing rows (src null, dst_rows); slot states move this way (slot_states.h).
cudaError_t LaunchMoveRows(const float* src, const int32_t* src_rows, float* dst,
                           const int32_t* dst_rows, int64_t n, int width, cudaStream_t stream);

enum class MergeOp { kConcat = 0, kSum = 1, kMul = 2, kAve = 3 };

// Bidirectional merge of rows: a [rows] and b [rows] vectors of `width` floats at strides
// stride_a / stride_b (in floats). kConcat writes out [rows, 2*width]; the others [rows, width].
cudaError_t LaunchMerge(const float* a, int64_t stride_a, const float* b, int64_t stride_b,
                        float* out, int64_t rows, int width, MergeOp op, cudaStream_t stream);

enum class HalfKind { kFp16 = 0, kBf16 = 1 };

// FP32 <-> FP16/BF16 (round to nearest even) for n elements.
cudaError_t LaunchToHalf(const float* in, void* out, int64_t n, HalfKind kind, cudaStream_t stream);
cudaError_t LaunchFromHalf(const void* in, float* out, int64_t n, HalfKind kind,
                           cudaStream_t stream);

// The same conversions with axes 0 and 1 swapped: FP32 [A, B, C] -> half [B, A, C], and back
// (batch-major model values to the sequence-major layout cuDNN runs fastest, in one pass).
cudaError_t LaunchToHalfSwap01(const float* in, void* out, int64_t A, int64_t B, int64_t C,
                               HalfKind kind, cudaStream_t stream);
cudaError_t LaunchFromHalfSwap01(const void* in, float* out, int64_t A, int64_t B, int64_t C,
                                 HalfKind kind, cudaStream_t stream);
// FP32 [A, B, C] -> FP32 [B, A, C].
cudaError_t LaunchSwap01(const float* in, float* out, int64_t A, int64_t B, int64_t C,
                         cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
