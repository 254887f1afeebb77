#include "server/generation/model_kind.h"

#include "absl/strings/str_cat.h"
#include "server/servable.h"

namespace rnnserve::server::generation {

absl::StatusOr<ModelKind> DetectKind(const Servable& model) {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", model.name(), " cannot generate: ", why,
        "; generation needs a language model with one input of token ids, either [batch, time] "
        "with per-step next-token outputs [batch, time, vocab] (a stateful causal LM) or "
        "[batch, W] with the next token's distribution [batch, vocab] (a fixed window)"));
  };
  if (model.inputs().size() != 1 || model.outputs().size() != 1) {
    return refuse(absl::StrCat("it has ", model.inputs().size(), " inputs and ",
                               model.outputs().size(), " outputs"));
  }
  const TensorSignature& in = model.inputs()[0];
  const TensorSignature& out = model.outputs()[0];
  if (in.batch_axis != 0 || out.batch_axis != 0) return refuse("its batch axis is not axis 0");
  if (in.shape.size() != 2) {
    return refuse(absl::StrCat("its input ", in.name, " is ", engine::ShapeString(in.shape)));
  }
  if (in.dtype != engine::DType::kInt64 && in.dtype != engine::DType::kFloat32) {
    return refuse(absl::StrCat("its input ", in.name, " is not numeric"));
  }
  ModelKind kind;
  kind.input_dtype = in.dtype;
  kind.vocab_size = out.shape.empty() ? -1 : out.shape.back();
  if (kind.vocab_size <= 0) {
    return refuse(absl::StrCat("its output ", out.name, " ", engine::ShapeString(out.shape),
                               " has no fixed last axis"));
  }
  if (in.shape[1] < 0 && out.shape.size() == 3) {
    if (!model.streamable().ok()) return refuse(std::string(model.streamable().message()));
    kind.kind = ModelKind::kStateful;
    return kind;
  }
  if (in.shape[1] > 0 && out.shape.size() == 2) {
    kind.kind = ModelKind::kWindow;
    kind.window = in.shape[1];
    return kind;
  }
  return refuse(absl::StrCat("its input ", in.name, " is ", engine::ShapeString(in.shape),
                             " and its output ", out.name, " ", engine::ShapeString(out.shape)));
}

}  // namespace rnnserve::server::generation
