#pragma once

// The one rule for per-sequence lengths (Batch::lengths, an ONNX sequence_lens input), checked
// by request validation at the edge and again by each engine's Run.
//
// A batch of B sequences padded to T steps takes either no lengths (every sequence is T long,
// or as long as the model's own masking says) or exactly B lengths, each in [0, T].
//
// Length 0 is an empty sequence, as ONNX's sequence_lens allows it: a recurrent layer runs no
// step for it, so its last output and final state are its initial state (zeros unless given)
// and its per-step outputs are zero. That is also what Keras gives for a sequence whose every
// step is masked (Masking, mask_zero): the output repeats the initial (zero) output and the
// state carries through unchanged. A negative length, or one past T, is INVALID_ARGUMENT.
//
// What lengths mean for a whole model (each sequence's answer is the framework's on the
// sequence truncated to its length, or the model refuses lengths naming the layer) is
// engine/lengths_rewrite.h. There a length-0 sequence read at its last step (PyTorch's
// `out[:, -1]` after a recurrent layer) reads the layer's zero output: its initial state when
// that is zero, as it is unless the graph gives one.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace rnnserve::engine {

// OK, or INVALID_ARGUMENT: "<what>: 1 given for a batch of 2" or
// "<what>[1] = 7: must be in [0, 6]". Empty `lengths` is OK.
absl::Status CheckLengths(absl::Span<const int32_t> lengths, int64_t batch, int64_t steps,
                          absl::string_view what = "lengths");

}  // namespace rnnserve::engine
