#pragma once

// Launcher of FusedRecurrent's step kernel (plain C++ header; the kernel is in
// fused_recurrent_kernel.cu). One block runs one (sequence, direction) through all its steps.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

enum class FusedCell : int { kLstm = 0, kGru = 1, kSimple = 2 };

// G = gates (LSTM 4: i,f,g,o; GRU 3: r,z,n; simple 1), H units, H' = output size (proj or H).
struct FusedRecurrentArgs {
  const float* xproj = nullptr;        // [B, T, dirs*G*H] x . W^T + folded biases, per direction
  const float* RT = nullptr;           // [dirs][H', G*H] R transposed (column j is R's row j)
  const float* PT = nullptr;           // [dirs][H, H'] LSTM projection transposed, or null
  const float* bRn = nullptr;          // [dirs][H] GRU reset_after: bR of the n gate, or null
  const float* peephole = nullptr;     // [dirs][3H] LSTM i, f, o, or null
  const int32_t* lengths = nullptr;    // [B], each in [0, T]
  const uint8_t* step_mask = nullptr;  // [B, T] 1 = valid step (Keras), or null: all valid
  const float* h0 = nullptr;           // [dirs, B, H'] or null (zeros)
  const float* c0 = nullptr;           // [dirs, B, H] or null (zeros); LSTM
  float* y = nullptr;                  // [B, T, dirs*H'] or null
  float* hy = nullptr;                 // [dirs, B, H']
  float* cy = nullptr;                 // [dirs, B, H] or null; LSTM
  int B = 0, T = 0, H = 0, Hp = 0, dirs = 1;
  FusedCell cell = FusedCell::kLstm;
  bool reset_after = true;    // GRU
  bool input_forget = false;  // LSTM: f = 1 - i
  float clip = 0.0f;          // > 0: gate pre-activations clipped to [-clip, clip]
  bool keras = true;          // masking semantics: Keras (else ONNX)
  bool zero_output_for_mask = false;
  bool continues = false;   // masked steps before the first valid one repeat h0 (not zeros)
  bool rt_in_smem = false;  // RT of the block's direction is staged in shared memory
  DeviceActivation f[2], g[2], h[2];  // per direction (ONNX f, g, h)
  bool reverse[2] = {false, false};
  bool outputs_in_processing_order[2] = {false, false};
};

// Dynamic shared memory per block, in bytes: gates [G*H], h [H'], c [H], tmp [H], plus RT
// [H', G*H] when it is staged.
inline size_t FusedRecurrentSmemBytes(int G, int H, int Hp, bool rt_in_smem) {
  const size_t gh = static_cast<size_t>(G) * H;
  return sizeof(float) * (gh + Hp + 2 * static_cast<size_t>(H) + (rt_in_smem ? gh * Hp : 0));
}

cudaError_t ConfigureFusedRecurrentKernel(size_t smem);
cudaError_t LaunchFusedRecurrentKernel(const FusedRecurrentArgs& args, int threads, size_t smem,
                                       cudaStream_t stream);

}  // namespace rnnserve::engine::cuda
