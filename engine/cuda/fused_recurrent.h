#pragma once

// Exact-FP32 recurrent layers that cuDNN cannot run, on a CUDA kernel of ours: LSTM with any
// activations of the IR (hard_sigmoid in its Keras 2, Keras 3 and ONNX alpha/beta forms, ...),
// peepholes, gate clip, input_forget and projection; GRU reset_after=False, and reset_after=True
// with other activations; simple RNNs with any activation; one or two directions in any
// arrangement (a lone reversed direction, Keras go_backwards with outputs in processing order).
//
// Contract:
// - Semantics are those of the CPU engine (engine/cpu/recurrent_direction.cc): per-sequence
//   lengths (0 allowed), Keras step masks (a masked step keeps the state and repeats the last
//   output, zero before the first valid step or with zero_output_for_mask; a forward Keras
//   layer repeats its last output past its length) and ONNX sequence_lens (zero past the
//   length).
// - Work: the input projection of every step of both directions is one cuBLAS SGEMM (FP32,
//   no tensor cores) plus a bias kernel: xproj [B, T, dirs*G*H]. Then one launch of B x dirs
//   blocks; block (b, d) runs sequence b's valid steps of direction d, h and c in shared
//   memory, each gate row's dot product summed in order by one thread (R is stored
//   transposed so that a warp reads consecutive gate rows), R staged in shared memory when
//   it fits. Simpler and slower than cuDNN's kernels at large H; it exists for exactness and
//   to keep the whole model on the device.
// - Weights are uploaded once at Create; xproj grows to the largest batch seen and is reused.
// - Every CUDA/cuBLAS failure is returned as INTERNAL naming the call. Not thread-safe.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/fused_recurrent_kernel.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

class FusedRecurrent {
 public:
  // UNIMPLEMENTED when the layer does not fit the kernel's shared memory on this device.
  static absl::StatusOr<std::unique_ptr<FusedRecurrent>> Create(const RecurrentSpec& spec,
                                                                cudaStream_t stream);
  ~FusedRecurrent();
  FusedRecurrent(const FusedRecurrent&) = delete;
  FusedRecurrent& operator=(const FusedRecurrent&) = delete;

  // io as for CudnnRecurrent::Forward, except that lengths may be 0; step_mask_dev is
  // [B, T] (1 = valid) or null. Enqueues on the stream; never synchronises.
  absl::Status Forward(const RecurrentIO& io, const uint8_t* step_mask_dev);

  int directions() const { return dirs_; }
  int hidden() const { return H_; }
  int output_size() const { return Hp_; }
  int threads() const { return threads_; }
  bool rt_in_shared_memory() const { return base_.rt_in_smem; }
  int64_t memory_bytes() const;

 private:
  FusedRecurrent(const RecurrentSpec& spec, cudaStream_t stream);

  // Fixed at construction.
  const int dirs_, G_, I_, H_, Hp_;
  const cudaStream_t stream_;
  FusedRecurrentArgs base_;  // the layer's options and weights; Forward fills in the batch
  int threads_ = 256;
  size_t smem_ = 0;

  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer W_;         // [dirs*G*H, I] both directions' W stacked
  DeviceBuffer bias_;      // [dirs*G*H] bW + bR (GRU reset_after: bW only for the n gate)
  DeviceBuffer RT_;        // [dirs][H', G*H]
  DeviceBuffer PT_;        // [dirs][H, H'] LSTM projection
  DeviceBuffer bRn_;       // [dirs][H] GRU reset_after
  DeviceBuffer peephole_;  // [dirs][3H]
  DeviceBuffer xproj_;     // [B, T, dirs*G*H]
};

}  // namespace rnnserve::engine::cuda
