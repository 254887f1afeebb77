#include "server/stream_window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rnnserve::server {
namespace {

bool HasTimeAxis(const TensorSignature& sig) {
  const size_t rank = sig.shape.size();
  return sig.dtype == engine::DType::kInt64 ? rank == 2 : rank >= 3;
}

}  // namespace

StreamSignature StreamSignatureOf(const Servable& servable) {
  StreamSignature out;
  out.inputs = servable.inputs();
  if (!servable.streamable().ok()) return out;
  for (TensorSignature& sig : out.inputs) {
    if (!HasTimeAxis(sig) || sig.shape[1] < 0) continue;
    if (out.window == 0 || sig.shape[1] < out.window) {
      out.window = sig.shape[1];
      out.window_input = sig.name;
    }
    sig.shape[1] = -1;
  }
  return out;
}

absl::Status CheckStreamWindow(const Servable& servable, const engine::Batch& chunk,
                               int64_t steps_before, int64_t* chunk_steps) {
  const StreamSignature stream = StreamSignatureOf(servable);
  int64_t steps = 0;
  for (size_t i = 0; i < stream.inputs.size() && i < chunk.inputs.size(); ++i) {
    if (HasTimeAxis(stream.inputs[i])) steps = std::max(steps, chunk.inputs[i].dim(1));
  }
  if (!chunk.lengths.empty()) {
    steps = *std::max_element(chunk.lengths.begin(), chunk.lengths.end());
  }
  *chunk_steps = steps;
  if (stream.window > 0 && steps_before + steps > stream.window) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", stream.window_input, "' fixes a window of ", stream.window,
        " steps; the stream has carried ", steps_before, " and this chunk brings ", steps, " (",
        steps_before + steps, " in all): start a new sequence for the next window"));
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::Batch> ValidateStreamChunk(const core::Request& request,
                                                  const Servable& servable) {
  const StreamSignature stream = StreamSignatureOf(servable);
  return core::Validate(
      request, {stream.inputs, servable.outputs(),
                [&servable](const std::string& layer) { return servable.HasRecurrentLayer(layer); },
                &servable.lengths()});
}

}  // namespace rnnserve::server
