// The thread-block-cluster recurrent kernel of FusedRnn (fused_rnn.h, the kernel itself in
// fused_rnn_cluster.cuh): its FP32-weight shapes and the launchers of every shape (the
// half-weight shapes are compiled in fused_rnn_cluster_half_kernel.cu, the tensor-core ones in
// fused_rnn_cluster_mma_kernel.cu).

#include <vector>

#include "engine/cuda/fused_rnn_cluster.cuh"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cuda/launch.cuh"

namespace rnnserve::engine::cuda {
namespace {

using Variant = FusedRnnClusterVariant;
constexpr FusedRnnCell kLstm = FusedRnnCell::kLstm, kGru = FusedRnnCell::kGru;

// LSTM (512 threads, at most 128 registers a thread). H=512 over 16 blocks: 128 rows a
// block, 3 of each warp's 8 in registers (48 floats a thread), 5 in shared memory (160 KiB).
// H=256 over 16 blocks: all 4 rows of a warp in registers. H=256 over 8 (the portable size):
// 4 of 8 in registers. H=128 over 8: all in registers.
// GRU (384 threads, at most 168 registers a thread): the same rows a warp, more of them in
// registers. H=512 over 16: 96 rows a block, 5 of each warp's 8 in registers (80 floats), 3
// in shared memory (72 KiB). H=256 over 16 and H=128 over 8: all 4 in registers. H=256 over
// 8: 8 of 8 in registers (64 floats).
constexpr Variant kVariants[] = {
    MakeClusterVariant<kLstm, 512, 16, 3>(), MakeClusterVariant<kLstm, 256, 16, 4>(),
    MakeClusterVariant<kLstm, 256, 8, 4>(),  MakeClusterVariant<kLstm, 128, 8, 4>(),
    MakeClusterVariant<kGru, 512, 16, 5>(),  MakeClusterVariant<kGru, 256, 16, 4>(),
    MakeClusterVariant<kGru, 256, 8, 8>(),   MakeClusterVariant<kGru, 128, 8, 4>(),
};

// The variants compiled for R stored as `weights`.
std::vector<const Variant*> VariantsOf(FusedRnnWeights weights) {
  std::vector<const Variant*> out;
  if (weights == FusedRnnWeights::kFp32) {
    for (const Variant& v : kVariants) out.push_back(&v);
    return out;
  }
  for (auto list : {FusedRnnClusterHalfVariants, FusedRnnClusterMmaVariants}) {
    int n = 0;
    const Variant* v = list(weights, &n);
    for (int i = 0; i < n; ++i) out.push_back(v + i);
  }
  return out;
}

const Variant* Find(FusedRnnCell cell, int H, FusedRnnClusterShape shape, FusedRnnWeights weights) {
  for (const Variant* v : VariantsOf(weights)) {
    if (v->cell == cell && v->H == H && v->cluster == shape.cluster && v->mma == shape.mma) {
      return v;
    }
  }
  return nullptr;
}

cudaLaunchConfig_t Config(const Variant& v, size_t smem, cudaStream_t stream,
                          cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(v.cluster);
  cfg.blockDim = dim3(v.threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = v.cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace

std::vector<FusedRnnClusterShape> FusedRnnClusterShapes(FusedRnnCell cell, int H,
                                                        FusedRnnWeights weights) {
  std::vector<FusedRnnClusterShape> out;
  for (const Variant* v : VariantsOf(weights)) {
    if (v->cell == cell && v->H == H) out.push_back({.cluster = v->cluster, .mma = v->mma});
  }
  return out;
}

size_t FusedRnnClusterSmemBytes(FusedRnnCell cell, int B, int H, FusedRnnClusterShape shape,
                                FusedRnnWeights weights) {
  const Variant* v = Find(cell, H, shape, weights);
  return v ? v->smem_bytes(B) : 0;
}

cudaError_t ConfigureFusedRnnClusterKernel(FusedRnnCell cell, int H, FusedRnnClusterShape shape,
                                           FusedRnnWeights weights, size_t smem) {
  const Variant* v = Find(cell, H, shape, weights);
  if (!v) return cudaErrorInvalidValue;
  cudaError_t e = RaiseDynamicSmemLimit(v->kernel, smem);
  if (e != cudaSuccess || shape.cluster <= 8) return e;
  return cudaFuncSetAttribute(v->kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

cudaError_t MaxActiveFusedRnnClusters(FusedRnnCell cell, int H, FusedRnnClusterShape shape,
                                      FusedRnnWeights weights, size_t smem, int* clusters) {
  const Variant* v = Find(cell, H, shape, weights);
  if (!v) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = Config(*v, smem, nullptr, &attr);
  return cudaOccupancyMaxActiveClusters(clusters, v->kernel, &cfg);
}

cudaError_t LaunchFusedRnnClusterKernel(const FusedRnnArgs& args, FusedRnnClusterShape shape,
                                        size_t smem, cudaStream_t stream) {
  const Variant* v = Find(args.cell, args.H, shape, args.weights);
  if (!v || args.B > kClusterMaxBatch) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = Config(*v, smem, stream, &attr);
  return cudaLaunchKernelEx(&cfg, v->kernel, args);
}

}  // namespace rnnserve::engine::cuda
