#pragma once

// How a model honours Batch::lengths (engine/lengths.h), worked out once per model, at load:
// each sequence's answer is the framework's answer on that sequence truncated to its length,
// or the model refuses lengths with INVALID_ARGUMENT naming the layer that cannot honour them.
//
// Keras files honour lengths through their layers' own masks (a recurrent layer stops at each
// sequence's length; masked steps follow Keras's rule). Graphs of generic tensor ops (ONNX,
// e.g. torch.onnx.export without sequence_lens) get the request's lengths put in:
//   - every recurrent layer reads them (ONNX semantics: its final state is the state at the
//     length; a reverse direction starts at the sequence's last real step; outputs past the
//     length are zero), the shorter of them and a sequence_lens the graph gives;
//   - a read of the last time step (Gather or Slice at -1 on the time axis: PyTorch's
//     `out[:, -1]`) reads each sequence's step lengths[b] - 1 (kGatherAtLengths; a sequence of
//     length 0 reads step 0, where a recurrent layer's output is zero: what it gives for a model
//     that starts from zero states, PyTorch's default);
//   - an output with a time axis is zero past each sequence's length (kZeroPastLengths), as
//     ONNX's Y is.
// A model cannot honour lengths when a layer mixes time steps before the answer is read (a
// reduction, softmax, convolution, pooling or concatenation over time, a flatten or reshape of
// the time axis, a read of a middle step, a matrix product along time), or has no sequence
// input ([B, T, ...] floats of rank >= 3 or [B, T] token ids; time-major [T, B, ...] when its
// recurrent layers read it so) at all; and when a rule (engine/plan/lengths_rules.h) cannot
// prove a layer per-step.
//
// The rewritten model answers exactly as the original when a batch has no lengths.

#include <vector>

#include "absl/status/status.h"
#include "engine/ir.h"

namespace rnnserve::engine {

struct LengthsRewrite {
  Model model;  // the model with the lengths ops put in (the original when lengths are refused)
  // OK, or INVALID_ARGUMENT "lengths: the model cannot apply per-sequence lengths: layer 'x'
  // (onnx::ReduceMean) reduces over the time axis".
  absl::Status honored;
  // Per model input: true for the sequence inputs, which Batch::lengths describe; the others
  // (initial states, sequence_lens, side features) take no lengths.
  std::vector<bool> sequence_inputs;
  // The sequence inputs are time-major, [T, B, ...] (PyTorch's batch_first=False): the lengths
  // are one per sequence of axis 1, each in [0, dim 0]. Otherwise [B, T, ...].
  bool time_major = false;
};

LengthsRewrite RewriteForLengths(const Model& model);

}  // namespace rnnserve::engine
