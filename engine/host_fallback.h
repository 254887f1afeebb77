#pragma once

// Host compute one engine borrows from another, through the core: the GPU engine runs on the
// host the layers it has no kernel for (and INT64 shape arithmetic, which lives there), and the
// recurrent batches no GPU kernel of a layer can take. The CPU engine implements HostFallback
// (engine/cpu/host_fallback.h); the engine factory (engine/factory/) hands it to the GPU engine,
// so engine/cuda never includes or links engine/cpu (docs/architecture.md, the layering rules).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

// A model value on the host: a tensor and, for sequences ([B, T, ...]), the mask that Keras
// masking or the request carry along with it.
struct HostValue {
  Tensor tensor;
  // Keras mask of a sequence value, as per-sequence lengths: size B when the value is a masked
  // sequence (steps at or past lengths[b] are masked); else empty.
  std::vector<int32_t> lengths;
  // [B, T] step mask (1 = valid), set only when some step before a sequence's length is masked
  // (e.g. Masking on data with all-zero steps inside a sequence). Agrees with `lengths`: every
  // step at or past lengths[b] is 0 and the step lengths[b]-1 is 1.
  std::vector<uint8_t> step_mask;
};

// One recurrent layer on the host, for the batches of a layer the borrowing engine cannot run.
// Scratch lives in it and is reused by every Run; Run is not reentrant.
class HostRecurrent {
 public:
  virtual ~HostRecurrent() = default;
  // x: [B, T, I]; lengths: size B, each in [0, T]; step_mask: empty, or [B, T] with 1 for
  // valid steps. initial_states: empty, or one tensor per state in the order of the layer's
  // state outputs (h [B, H'] then, LSTM, c [B, H], per direction). Fills `outputs` in Keras's
  // order (the sequence or last output, two with merge mode none, then the final states when
  // return_state is set); `final_states`, when not null, gets the final states whatever
  // return_state says. `continues` as Batch::continues.
  virtual absl::Status Run(const Tensor& x, absl::Span<const int32_t> lengths,
                           absl::Span<const uint8_t> step_mask,
                           absl::Span<const Tensor> initial_states, std::vector<Tensor>* outputs,
                           std::vector<Tensor>* final_states, bool continues) = 0;
  virtual int num_outputs() const = 0;
  // Outputs that are sequences when return_sequences is set (1, or 2 with merge mode none).
  virtual int num_sequence_outputs() const = 0;
};

class HostFallback {
 public:
  virtual ~HostFallback() = default;
  // The layer's host kernel (one thread, FP32 weights); validates the spec, INVALID_ARGUMENT or
  // UNIMPLEMENTED naming the layer otherwise.
  virtual absl::StatusOr<std::unique_ptr<HostRecurrent>> NewRecurrent(
      const RecurrentSpec& spec, const std::string& name) const = 0;
  // Runs one non-recurrent layer: reads the values the layer names as inputs and writes those
  // it names as outputs. INTERNAL for a recurrent layer or a kind with no host form.
  virtual absl::Status RunLayer(const Layer& layer, std::vector<HostValue>* values) const = 0;
};

}  // namespace rnnserve::engine
