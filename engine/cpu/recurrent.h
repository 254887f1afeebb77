#pragma once

// CPU kernel for one recurrent layer (LSTM, GRU, simple RNN; one or two directions) over a
// batch of variable-length sequences.
//
// Per direction: the input projection of every valid step is one GEMM; then one recurrent GEMM
// per step over the sequences still running (sorted by length, they are a prefix), followed by
// the fused pointwise gate update. Steps past a sequence's length are never computed.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cpu {

class RecurrentKernel {
 public:
  static absl::StatusOr<std::unique_ptr<RecurrentKernel>> Create(const RecurrentSpec& spec,
                                                                 const std::string& name);

  // x: [B, T, I]; lengths: size B, each in [0, T]. initial_states: empty, or one tensor per
  // state in the order of the layer's state outputs (h, c per direction for LSTM; h for GRU
  // and RNN), each [B, size].
  // Fills `outputs` in Keras's order: the sequence or last output (two with merge mode none),
  // then the final states (h, c per direction) when return_state is set.
  absl::Status Run(const Tensor& x, absl::Span<const int32_t> lengths,
                   absl::Span<const Tensor> initial_states, std::vector<Tensor>* outputs);

  int num_outputs() const;
  int64_t memory_bytes() const;

 private:
  RecurrentKernel(const RecurrentSpec& spec, std::string name);

  // Runs direction `d`; writes its sequence output [B, T, H'] (if wanted) and final states.
  void RunDirection(int d, const Tensor& x, absl::Span<const int32_t> lengths,
                    const float* h0, const float* c0, float* seq_out, float* h_out, float* c_out);

  const RecurrentSpec spec_;
  const std::string name_;

  // Scratch, grown on demand and reused across runs.
  std::vector<float> xproj_;  // [B*T, G*H] input projection of every step, biases folded in
  std::vector<float> gates_;  // [B, G*H]
  std::vector<float> h_;      // [B, H'] running output state, in length-sorted order
  std::vector<float> c_;      // [B, H] LSTM cell state, in length-sorted order
  std::vector<float> hraw_;   // [B, H] LSTM output before projection
  std::vector<float> rh_;     // [B, H'] GRU reset_after=false: r * h
  std::vector<float> seq_;    // [B, T, H'] per-direction sequence output before merging
};

}  // namespace rnnserve::engine::cpu
