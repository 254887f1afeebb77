#pragma once

// CPU forms of the non-recurrent layers. Each takes its input value and writes a new one.
// A value is a tensor plus, for sequences ([B, T, ...]), the per-sequence lengths that Keras
// masking or the request carry along.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/host_fallback.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cpu {

// A value is a HostValue (engine/host_fallback.h): a tensor and its mask.
using Value = HostValue;

// Copies the mask (lengths and step mask) of `from` onto `to`.
inline void KeepMask(const Value& from, Value* to) {
  to->lengths = from.lengths;
  to->step_mask = from.step_mask;
}

// Sets out's lengths (and step mask, when some step inside a length is masked) from
// per-step validity `valid` [B, T].
void SetMaskFromSteps(const std::vector<uint8_t>& valid, int64_t B, int64_t T, Value* out);

// y [rows, n] = x [rows, k] . w [k, n], all row-major: the Dense and Conv1D products. With
// more than one OpenMP thread and at least 64M multiply-adds (milliseconds of work), blocks of
// rows are claimed dynamically by the threads, each computing its block with Eigen on one
// thread; otherwise one Eigen product on the calling thread. (Eigen's own parallel GEMM
// spin-waits for its threads between blocks: on a machine with more runnable threads than
// cores, a descheduled one stalled a 21x64x344 product for tens of milliseconds.)
void MatMulRows(const float* x, const float* w, float* y, int64_t rows, int64_t k, int64_t n);

// y = act(x . kernel + bias) over the last axis.
absl::Status RunDense(const DenseSpec& spec, const std::string& name, const Value& in, Value* out);

// Keras Masking: a step whose features all equal mask_value is padding; the length of each
// sequence ends after its last unmasked step. Masked steps are zeroed, as Keras multiplies by
// the mask.
absl::Status RunMasking(const MaskingSpec& spec, const Value& in, Value* out);

// Token ids [B, T] -> [B, T, dim]; mask_zero makes id 0 padding.
absl::Status RunEmbedding(const EmbeddingSpec& spec, const std::string& name, const Value& in,
                          Value* out);

absl::Status RunActivation(const Activation& activation, const Value& in, Value* out);

}  // namespace rnnserve::engine::cpu
