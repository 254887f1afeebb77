#include "engine/cudnn_support.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::engine {
namespace {

bool Is(const Activation& a, ActivationKind kind) { return a.kind == kind; }

}  // namespace

absl::Status CudnnSupports(const RecurrentSpec& spec) {
  const auto& dirs = spec.directions;
  if (dirs.empty() || dirs.size() > 2) {
    return absl::UnimplementedError("cuDNN runs one or two directions");
  }
  if (dirs[0].reverse || dirs[0].outputs_in_processing_order) {
    return absl::UnimplementedError(
        "a lone reversed direction (go_backwards / ONNX reverse) is not a cuDNN mode");
  }
  if (dirs.size() == 2 && (!dirs[1].reverse || dirs[1].outputs_in_processing_order)) {
    return absl::UnimplementedError("the second direction is not cuDNN's backward direction");
  }
  if (spec.clip != 0.0f) {
    return absl::UnimplementedError(
        "gate pre-activation clip (cuDNN clips the cell state, not the gates)");
  }
  if (spec.input_forget) return absl::UnimplementedError("input_forget (coupled i/f gates)");
  for (const RecurrentDirection& d : dirs) {
    if (!d.peephole.empty()) return absl::UnimplementedError("peephole connections");
    switch (spec.cell) {
      case CellType::kLstm:
        if (!Is(d.f, ActivationKind::kSigmoid) || !Is(d.g, ActivationKind::kTanh) ||
            !Is(d.h, ActivationKind::kTanh)) {
          return absl::UnimplementedError(
              absl::StrCat("LSTM activations ", ActivationName(d.f), "/", ActivationName(d.g), "/",
                           ActivationName(d.h), " (cuDNN computes sigmoid/tanh/tanh only)"));
        }
        break;
      case CellType::kGru:
        if (!Is(d.f, ActivationKind::kSigmoid) || !Is(d.g, ActivationKind::kTanh)) {
          return absl::UnimplementedError(absl::StrCat("GRU activations ", ActivationName(d.f), "/",
                                                       ActivationName(d.g),
                                                       " (cuDNN computes sigmoid/tanh only)"));
        }
        break;
      case CellType::kSimpleRnn:
        if (!Is(d.f, ActivationKind::kTanh) && !Is(d.f, ActivationKind::kRelu)) {
          return absl::UnimplementedError(absl::StrCat(
              "simple RNN activation ", ActivationName(d.f), " (cuDNN computes tanh or relu)"));
        }
        break;
    }
  }
  if (spec.cell == CellType::kGru && !spec.reset_after) {
    return absl::UnimplementedError(
        "GRU reset_after=False (cuDNN applies the reset gate after the recurrent matmul)");
  }
  if (spec.proj_size > 0 && (spec.cell != CellType::kLstm || spec.proj_size >= spec.hidden_size)) {
    return absl::UnimplementedError("projection other than LSTM proj_size < hidden_size");
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine
