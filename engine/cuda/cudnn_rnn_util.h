#pragma once

// Small helpers of CudnnRecurrent (cudnn_rnn.cc, cudnn_rnn_algorithms.cc): batch predicates,
// the step bucket that algorithm choices are kept per, algorithm names and cuDNN data types.

#include <algorithm>
#include <cstddef>

#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/stack_timing.h"

namespace rnnserve::engine::cuda {

// Whether every sequence of the batch has all T steps.
inline bool EveryLengthFull(const RecurrentIO& io) {
  return std::all_of(io.lengths.begin(), io.lengths.end(),
                     [&](int32_t len) { return len == io.T; });
}

// B rounded up to a power of two: the batch sizes one timed choice serves (5..8 share the
// choice timed for the first of them), so a batcher's varying batch sizes pay a few timings, not
// one each. The fused kernels' limits (8, 64 sequences) are bucket edges.
inline int BatchBucket(int B) { return StepBucket(B); }

// `dtype` names the precision of the fused kernels' weights (FP32, or R in FP16 / BF16).
inline const char* AlgoName(cudnnRNNAlgo_t algo, cudnnDataType_t dtype = CUDNN_DATA_FLOAT) {
  if (algo == kFusedClusterAlgo && dtype == CUDNN_DATA_BFLOAT16) return "fused_cluster_bf16";
  if (algo == kFusedClusterAlgo && dtype == CUDNN_DATA_HALF) return "fused_cluster_fp16";
  if (algo == kFusedAlgo && dtype == CUDNN_DATA_BFLOAT16) return "fused_bf16";
  if (algo == kFusedAlgo && dtype == CUDNN_DATA_HALF) return "fused_fp16";
  if (algo == kFusedBatchedAlgo && dtype == CUDNN_DATA_BFLOAT16) return "fused_batched_bf16";
  if (algo == kFusedBatchedAlgo && dtype == CUDNN_DATA_HALF) return "fused_batched_fp16";
  switch (static_cast<int>(algo)) {
    case CUDNN_RNN_ALGO_STANDARD:
      return "standard";
    case CUDNN_RNN_ALGO_PERSIST_STATIC:
      return "persist_static";
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC:
      return "persist_dynamic";
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H:
      return "persist_static_small_h";
    case kFusedAlgo:
      return "fused_fp32";
    case kFusedClusterAlgo:
      return "fused_cluster_fp32";
    case kFusedBatchedAlgo:
      return "fused_batched_fp32";
    case kStandardSeqMajorAlgo:
      return "standard_seq_major";
    default:
      return "unknown";
  }
}

inline size_t ElementBytes(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }

inline HalfKind HalfOf(cudnnDataType_t t) {
  return t == CUDNN_DATA_HALF ? HalfKind::kFp16 : HalfKind::kBf16;
}

inline cudnnDataType_t DataTypeFor(MathMode m) {
  switch (m) {
    case MathMode::kFp16:
      return CUDNN_DATA_HALF;
    case MathMode::kBf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

}  // namespace rnnserve::engine::cuda
