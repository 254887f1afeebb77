#include "engine/ir.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine {

std::string ActivationName(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kLinear:
      return "linear";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kTanh:
      return "tanh";
    case ActivationKind::kRelu:
      return "relu";
    case ActivationKind::kHardSigmoid:
      return absl::StrCat("hard_sigmoid(", a.alpha, "x+", a.beta, ")");
    case ActivationKind::kLeakyRelu:
      return absl::StrCat("leaky_relu(", a.alpha, ")");
    case ActivationKind::kThresholdedRelu:
      return absl::StrCat("thresholded_relu(", a.alpha, ")");
    case ActivationKind::kScaledTanh:
      return absl::StrCat("scaled_tanh(", a.alpha, ",", a.beta, ")");
    case ActivationKind::kAffine:
      return absl::StrCat("affine(", a.alpha, ",", a.beta, ")");
    case ActivationKind::kElu:
      return absl::StrCat("elu(", a.alpha, ")");
    case ActivationKind::kSoftsign:
      return "softsign";
    case ActivationKind::kSoftplus:
      return "softplus";
    case ActivationKind::kSelu:
      return "selu";
    case ActivationKind::kGelu:
      return "gelu";
    case ActivationKind::kSwish:
      return "swish";
    case ActivationKind::kExponential:
      return "exponential";
    case ActivationKind::kSoftmax:
      return "softmax";
  }
  return "?";
}

std::string CellTypeName(CellType cell) {
  switch (cell) {
    case CellType::kLstm:
      return "LSTM";
    case CellType::kGru:
      return "GRU";
    case CellType::kSimpleRnn:
      return "RNN";
  }
  return "?";
}

std::string MergeModeName(MergeMode mode) {
  switch (mode) {
    case MergeMode::kConcat:
      return "concat";
    case MergeMode::kSum:
      return "sum";
    case MergeMode::kMul:
      return "mul";
    case MergeMode::kAve:
      return "ave";
    case MergeMode::kNone:
      return "none";
  }
  return "?";
}

std::string MaskSemanticsName(MaskSemantics m) {
  return m == MaskSemantics::kKeras ? "keras" : "onnx";
}

namespace {

absl::Status CheckSize(const std::string& layer, const char* what, size_t got, size_t want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", layer, "': ", what, " has ", got, " values, expected ", want));
}

}  // namespace

absl::Status RecurrentSpec::Validate(const std::string& layer) const {
  if (input_size <= 0 || hidden_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer, "': input size ", input_size,
                                                   " and hidden size ", hidden_size,
                                                   " must be positive"));
  }
  if (directions.empty() || directions.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer, "': expected 1 or 2 directions, got ", directions.size()));
  }
  const size_t gh = static_cast<size_t>(gates()) * hidden_size;
  const size_t rin = proj_size > 0 ? proj_size : hidden_size;
  for (const RecurrentDirection& d : directions) {
    if (auto s = CheckSize(layer, "W", d.W.size(), gh * input_size); !s.ok()) return s;
    if (auto s = CheckSize(layer, "R", d.R.size(), gh * rin); !s.ok()) return s;
    if (auto s = CheckSize(layer, "bW", d.bW.size(), gh); !s.ok()) return s;
    if (auto s = CheckSize(layer, "bR", d.bR.size(), gh); !s.ok()) return s;
    if (proj_size > 0) {
      if (auto s = CheckSize(layer, "P", d.P.size(), size_t(proj_size) * hidden_size); !s.ok())
        return s;
    }
    if (!d.peephole.empty()) {
      if (auto s = CheckSize(layer, "peephole", d.peephole.size(), 3 * size_t(hidden_size));
          !s.ok())
        return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Model::Validate() const {
  if (inputs.empty()) return absl::InvalidArgumentError("model has no inputs");
  if (output_values.empty() || output_values.size() != outputs.size()) {
    return absl::InvalidArgumentError("model outputs are missing or inconsistent");
  }
  std::vector<bool> defined(num_values, false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int>(i) >= num_values) return absl::InvalidArgumentError("bad value count");
    defined[i] = true;
  }
  for (const Layer& layer : layers) {
    for (int v : layer.inputs) {
      if (v < 0 || v >= num_values || !defined[v]) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer.name, "' reads value ", v, " before it is defined"));
      }
    }
    for (int v : layer.outputs) {
      if (v < 0 || v >= num_values || defined[v]) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer.name, "' writes value ", v, " twice or out of range"));
      }
      defined[v] = true;
    }
    if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
      if (auto s = rnn->Validate(layer.name); !s.ok()) return s;
    }
    if (const auto* dense = std::get_if<DenseSpec>(&layer.spec)) {
      if (auto s =
              CheckSize(layer.name, "kernel", dense->kernel.size(), size_t(dense->in) * dense->out);
          !s.ok())
        return s;
      if (!dense->bias.empty()) {
        if (auto s = CheckSize(layer.name, "bias", dense->bias.size(), dense->out); !s.ok())
          return s;
      }
    }
  }
  for (int v : output_values) {
    if (v < 0 || v >= num_values || !defined[v]) {
      return absl::InvalidArgumentError(absl::StrCat("model output value ", v, " is undefined"));
    }
  }
  return absl::OkStatus();
}

std::string TensorOpName(TensorOpKind kind) {
  static const char* const kNames[] = {
      "Constant",     "Shape",     "Gather",     "Concat",     "Unsqueeze", "Squeeze",
      "Slice",        "Transpose", "Reshape",    "Expand",     "Cast",      "ConstantOfShape",
      "Add",          "Sub",       "Mul",        "Div",        "Pow",       "Min",
      "Max",          "MatMul",    "Gemm",       "Activation", "Neg",       "Abs",
      "Sqrt",         "Exp",       "Log",        "Reciprocal", "Softmax",   "LogSoftmax",
      "Flatten",      "Split",     "ReduceMean", "ReduceSum",  "ReduceMax", "Range",
      "AttachLengths"};
  switch (kind) {  // the request-lengths ops (engine/lengths_rewrite.h)
    case TensorOpKind::kAttachRequestLengths:
      return "AttachRequestLengths";
    case TensorOpKind::kGatherAtLengths:
      return "GatherAtLengths";
    case TensorOpKind::kZeroPastLengths:
      return "ZeroPastLengths";
    default:
      break;
  }
  const size_t i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace rnnserve::engine
