#pragma once

// What each layer does to the request's lengths, for engine/lengths_rewrite.h: the rules by
// which a value is known to hold, at every step inside each sequence's length, what the
// framework computes on that sequence truncated to its length.
//
// A value is one of:
//   exact  independent of the padding: weights, constants, batch sizes, final states, a
//          sequence's last step read at its length; any op of exact values is exact.
//   steps  a sequence [..., B at `batch`, ..., T at `time`, ...] whose steps before each
//          sequence's length are exact (what lies past a length is unspecified): the model's
//          sequence inputs, and whatever per-step ops make of them.
//   shape  an int64 shape vector with (some of) its elements tagged: the batch size, the padded
//          length T, or something computed from T.
//   mixed  depends on padded steps in a way no rule here proves harmless (a reduction over
//          time, a time-axis convolution, a flatten of time into features...).

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ir.h"

namespace rnnserve::engine::plan {

// Elements of a shape vector that are not plain numbers.
inline constexpr int64_t kTagBatch = INT64_MIN;      // the batch size B
inline constexpr int64_t kTagTime = INT64_MIN + 1;   // the padded length T
inline constexpr int64_t kTagFromT = INT64_MIN + 2;  // computed from T
inline constexpr int64_t kTagUnknown = INT64_MIN + 3;
inline constexpr int64_t kTagOther = INT64_MIN + 4;  // independent of T, value unknown here

inline bool MayDependOnTime(int64_t tag) {
  return tag == kTagTime || tag == kTagFromT || tag == kTagUnknown;
}

struct SeqInfo {
  enum class Kind { kExact, kSteps, kShape, kMixed };
  Kind kind = Kind::kExact;
  int rank = -1;  // -1: not known here
  // kSteps: the axes; native when the engines carry the request's lengths beside the value
  // (Value::lengths), as model inputs and the layers that keep a Keras mask do.
  int batch = -1, time = -1;
  bool native = false;
  // kShape (rank 1; empty with known = false when its length is not known here), and exact int
  // vectors whose values are known (constants).
  std::vector<int64_t> ints;
  bool ints_known = false;

  static SeqInfo Exact(int rank = -1) { return {.kind = Kind::kExact, .rank = rank}; }
  static SeqInfo Mixed() { return {.kind = Kind::kMixed}; }
  static SeqInfo Steps(int rank, int batch, int time, bool native = false) {
    return {.kind = Kind::kSteps, .rank = rank, .batch = batch, .time = time, .native = native};
  }
  bool steps() const { return kind == Kind::kSteps; }
  bool exact() const { return kind == Kind::kExact; }
};

// What a generic tensor op makes of its operands' infos (null for an absent operand).
struct OpVerdict {
  std::vector<SeqInfo> outs;  // one per output
  // Non-empty: why the op cannot honour lengths ("reduces over the time axis").
  std::string mixes;
  // The op reads a sequence's last step (Gather / Slice at -1 on the time axis): it becomes a
  // kGatherAtLengths over operand 0 with these axes.
  bool last_step = false;
  bool keep_dims = false;
  int batch = -1, time = -1;
};

OpVerdict ClassifyTensorOp(const TensorOpSpec& spec, const std::vector<const SeqInfo*>& in,
                           int num_outputs);

// The same for the other non-recurrent layers (Dense, Keras layers...), of one input.
OpVerdict ClassifyLayer(const LayerSpec& spec, const std::vector<const SeqInfo*>& in);

}  // namespace rnnserve::engine::plan
