#pragma once

// The GPU engine's compiled model: one instance on one GPU, with its own stream, cuDNN and
// cuBLAS handles, weights and scratch.
//
// Placement (placements() says which engine runs each layer and why):
// - recurrent layers cuDNN computes exactly (CudnnSupports) run on cuDNN (cudnn_rnn.h);
//   the others (hard_sigmoid and other activations, GRU reset_after=False, peepholes, clip,
//   input_forget, a lone reversed direction) run on our fused recurrent kernel in exact FP32
//   (fused_recurrent.h), as do the batches cuDNN cannot run (a sequence of length 0, masked
//   steps inside a sequence). The CPU engine's kernel runs stateful batches
//   (Batch::initial_states / final_states) and a layer too large for the fused kernel's
//   shared memory;
// - Dense / TimeDistributed(Dense) run as a cuBLAS SGEMM plus a bias+activation kernel,
//   Activation and softmax as kernels, Embedding as a gather kernel (ids are validated on the
//   host, where they arrive); Masking runs on the host, where the input arrives, because its
//   lengths must be on the host for cuDNN's descriptors;
// - normalisation, Conv1D, pooling, shape and merge layers and ONNX tensor ops over FP32 data
//   run as kernels of device_layers.h; tensor ops over INT64 tensors (shape arithmetic) run on
//   the host, where those tensors live.
// Values move between host and device only where a layer's placement asks for it; a model
// whose layers all run on the GPU uploads its inputs once and downloads its outputs once.
//
// Whole-batch graphs: the second batch of a shape (input shapes, lengths' longest and whether
// any is short or 0, step-level batching's slot store) is captured whole into a CUDA graph, its
// uploads, every layer and its downloads; later batches of that shape replay it with one launch
// and one wait, their inputs copied into the graph's page-locked area. Models with Embedding
// (ids checked on the host) or Masking (lengths derived there), and batches whose launches
// depend on values the host reads (the request's INT64 tensors, host layers over device values
// or the request's values, states given or returned on the host) always run eagerly; shape
// arithmetic on the host (ONNX Shape, Gather, Concat over shapes) follows from the key.
// CompileOptions::whole_batch_graphs = false (config.pbtxt: optimization { gpu_graphs:
// GPU_GRAPHS_OFF }, or RNNSERVE_GPU_MODEL_GRAPHS=0 in the server's environment) turns them off
// (a recurrent layer then still replays its own). CompiledModel::counters() counts the
// replays and the device-to-host copies of a run.
//
// Host fallback: the layers and batches placed on the host run on the CPU engine's kernels,
// reached through engine/host_fallback.h (the engine factory hands them in; engine/cuda never
// includes engine/cpu).
//
// Math modes: kFp32 is exact FP32 (cuDNN FMA math, cuBLAS default FP32 math, the fused
// kernels' FP32 sums; the batch-tiled kernel's tensor-core tiles keep FP32 accuracy with three
// TF32 products a product, docs/gpu-kernels.md); kTf32 lets
// cuDNN and cuBLAS use TF32 tensor cores; kFp16 / kBf16 keep recurrent weights and data in
// half precision with FP32 accumulation (dense layers stay FP32).
//
// Errors: a CUDA, cuDNN or cuBLAS failure fails the batch with INTERNAL and names the call;
// bad input fails with INVALID_ARGUMENT naming the layer and the expected shape.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/host_fallback.h"

namespace rnnserve::engine::cuda {

// `host` runs what is placed on the host (engine/cpu/host_fallback.h); never null.
absl::StatusOr<std::unique_ptr<CompiledModel>> CompileForGpu(
    const Model& model, const CompileOptions& options, int device,
    std::shared_ptr<const HostFallback> host);

}  // namespace rnnserve::engine::cuda
