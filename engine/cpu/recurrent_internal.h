#pragma once

// Layouts shared by recurrent.cc (packing, Run) and recurrent_direction.cc (the step loop).

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/panel_gemm.h"
#include "engine/cpu/quant_gemm.h"
#include "engine/cpu/recurrent.h"

namespace rnnserve::engine::cpu {

// Below this many multiply-adds per step (B * G * H * H'), the hand-off between threads costs
// more than the work it splits: the unit split runs such a step on one thread (an H=32 LSTM at
// B=1 has 4K; H=128 has 64K and is faster on two threads).
inline constexpr int64_t kMinSharedStepWork = 64 * 1024;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRow = Eigen::Map<RowMat>;
using CMapRow = Eigen::Map<const RowMat>;

struct RecurrentKernel::Packed {
  // One thread's share: the weights of its units u0 .. u0+nu, gate-major (column q*nu + j is
  // gate q of unit u0 + j), packed in the layer's weight precision (quant_gemm.h).
  struct Slice {
    PackedWeights W;   // [G*nu, I]
    PackedWeights R;   // [G*nu, H'] (GRU reset_after=false: [2*nu, H], r, z)
    PackedWeights Rn;  // GRU reset_after=false: the n rows [nu, H]
    PackedWeights P;   // LSTM projection: P's rows p0 .. p0+np, [np, H]
    // Folded biases [G*nu]: bW + bR, except GRU reset_after's n gate, whose bR sits inside
    // r * (R h + bR_n).
    std::vector<float> bias;
    std::vector<float> bRn;  // [nu] GRU reset_after: bR of the n gate
  };
  std::vector<Slice> slices;  // [threads]
  // Row split with more than one thread: every unit in one slice (one thread's slice already
  // holds every unit).
  std::unique_ptr<Slice> whole;
  const Slice& all_units() const { return whole ? *whole : slices[0]; }
};

struct RecurrentKernel::Scratch {
  AlignedFloats xpack;  // [rows, I] valid input steps packed, when lengths differ
  // [threads][rows, G*nu] input projection of every valid step onto each thread's gates
  std::vector<AlignedFloats> xproj;
  AlignedFloats h[2];    // [B, H'] output state, ping-pong by step parity, length-sorted
  AlignedFloats c;       // [B, H] LSTM cell state, length-sorted
  AlignedFloats shared;  // [B, H] LSTM output before projection, or GRU r * h
  std::vector<AlignedFloats> gates;  // [threads][B, G*nu] this thread's gate slice
  std::vector<GemmScratch> gemm;     // [threads] BF16 / INT8: each slice's converted A
  // Row split: [rows, G*H] every unit's input projection; [threads][B, G*H] each thread's gates.
  AlignedFloats xproj_all;
  std::vector<AlignedFloats> row_gates;
  // Row bookkeeping for the current direction, in length-sorted order.
  std::vector<int> order;            // [B] batch index of sorted row k
  std::vector<int32_t> len;          // [B] length of sorted row k
  std::vector<int64_t> offset;       // [B] (by batch index) first xproj row of each sequence
  std::vector<int> active;           // [T] rows still running at step s
  std::vector<int64_t> first_valid;  // [B] step masks only: first unmasked step of row k
};

}  // namespace rnnserve::engine::cpu
