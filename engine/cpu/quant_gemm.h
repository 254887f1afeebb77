#pragma once

// A weight matrix B [n, k] prepacked for C[m, n] = A[m, k] . B^T in one of three precisions,
// the recurrent kernel's W, R (and GRU R_n, LSTM P) in the mode the model's config asks for.
// A, C, the state and every accumulation outside the dot products stay FP32.
//
//   kFp32  panels of floats, PanelGemm (panel_gemm.h).
//   kBf16  weights rounded to bfloat16 (Eigen::bfloat16, round to nearest even), half the
//          bytes a step reads. Panels of 32 columns hold k in pairs, [panel][k/2][32][2], the
//          operand layout of AVX-512 BF16's vdpbf16ps. Where the CPU has avx512_bf16 (and the
//          avx512 set runs), A is rounded to bfloat16 too and vdpbf16ps accumulates the pairs
//          in FP32; elsewhere the weights are widened to FP32 in registers (a shift or a
//          mask) and multiplied with A as it is.
//   kInt8  per-output-channel symmetric int8 weights (scale_j = max|B[j, :]| / 127) in
//          panels [panel][k/4][32][4], the operand layout of AVX-512 VNNI's vpdpbusd. A is
//          quantised on every call, row by row, to uint8 with its own scale and zero point
//          (asymmetric, the range always holding 0), as onnxruntime's DynamicQuantizeLSTM does
//          per step; the integer dot products are exact in int32 and one FP32 multiply per
//          output undoes both scales: C = sa * sb_j * (sum q_a q_b - za * sum q_b).
//          vpdpbusd where the CPU has avx512_vnni (and the avx512 set runs), int32 vector
//          multiply-adds elsewhere: the same integers, so every set gives the same result.
//
// Each kernel is built once per kernel set (avx512, avx2, plain) with its target attributes;
// the set is the one PanelGemm runs (ActiveCpuKernelSet, RNNSERVE_CPU_KERNELS), and within
// avx512 the BF16 / VNNI instructions are used when CPUID reports them.
// Single-threaded, like PanelGemm: callers split the columns between threads, each with its
// own GemmScratch.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cpu/panel_gemm.h"
#include "engine/engine.h"

namespace rnnserve::engine::cpu {

const char* CpuWeightsName(CpuWeights weights);  // "fp32", "bf16", "int8"

// How the active kernel set computes `weights` on this CPU, for metadata and the log:
// "fp32", "bf16 (avx512_bf16 vdpbf16ps)", "bf16 (widened to fp32)", "int8 (avx512_vnni
// vpdpbusd)", "int8 (int32 multiply-add)".
std::string CpuWeightsPath(CpuWeights weights);

// A's conversions for one caller (one thread's slice): reused by every call, grown on demand.
struct GemmScratch {
  std::vector<uint8_t, CacheLineAllocator<uint8_t>> a;  // A in bf16 pairs or uint8 quads
  std::vector<float> a_scale;                           // [rows] INT8: A's scale per row
  std::vector<int32_t> a_zero;                          // [rows] INT8: A's zero point per row
};

class PackedWeights {
 public:
  PackedWeights() = default;
  // B is [n, k] row-major with row stride ldb.
  static PackedWeights Pack(const float* b, int64_t ldb, int n, int k, CpuWeights mode);

  // C[i, j] = sum_l A[i, l] * B[j, l] for i < m, j < n; A has row stride lda, C row stride
  // ldc. `backwards`: the panels stream last to first (see PanelGemm).
  void Gemm(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc, bool backwards,
            GemmScratch* scratch) const;

  int n() const { return n_; }
  int k() const { return k_; }
  int64_t bytes() const;

 private:
  void GemmBf16(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc, bool backwards,
                GemmScratch* scratch) const;
  void GemmInt8(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc, bool backwards,
                GemmScratch* scratch) const;

  CpuWeights mode_ = CpuWeights::kFp32;
  int n_ = 0, k_ = 0;
  // kBf16 / kInt8: depth words (pairs, quads) a panel holds, rounded up to whole AMX tiles
  // (kAmxDepth, zero-filled) where the amx set runs (amx_).
  int depth_ = 0;
  bool amx_ = false;
  AlignedFloats f32_;                                         // kFp32: PackPanels
  std::vector<uint16_t, CacheLineAllocator<uint16_t>> bf16_;  // kBf16: [panel][k/2][32][2]
  std::vector<int8_t, CacheLineAllocator<int8_t>> i8_;        // kInt8: [panel][k/4][32][4]
  std::vector<float> scale_;     // kInt8: [panels * 32] per output channel, 0 past n
  std::vector<int32_t> colsum_;  // kInt8: [panels * 32] sum over k of the int8 weights
};

}  // namespace rnnserve::engine::cpu
