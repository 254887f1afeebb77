#include "models/keras/keras_mask.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::models::keras {
namespace {

using Form = SymbolicMask::Form;

SymbolicMask Unsupported(std::string why) {
  SymbolicMask m;
  m.form = Form::kUnsupported;
  m.why = std::move(why);
  return m;
}

SymbolicMask Steps(Form form, std::vector<MaskOrigin> any_of) {
  SymbolicMask m;
  m.form = form;
  for (const MaskOrigin& o : any_of) {
    if (std::find(m.any_of.begin(), m.any_of.end(), o) == m.any_of.end()) m.any_of.push_back(o);
  }
  return m;
}

// The first unsupported operand, if any, so that its reason travels on.
const SymbolicMask* FirstUnsupported(const std::vector<MaskOperand>& operands) {
  for (const MaskOperand& o : operands) {
    if (o.symbolic && o.symbolic->form == Form::kUnsupported) return o.symbolic;
  }
  return nullptr;
}

// Keras writes `axis` as -1 or as the last axis's index (rank known).
bool IsLastAxis(const Json& config, int rank) {
  const int axis = GetIntOrFirst(config, "axis", 0);
  return axis == -1 || (rank > 0 && axis == rank - 1);
}

SymbolicMask EvalNotEqual(const std::string& op, const std::vector<MaskOperand>& in) {
  if (in.size() != 2) return Unsupported(absl::StrCat(op, " does not have two operands"));
  const MaskOperand* tensor = in[0].scalar ? &in[1] : &in[0];
  const MaskOperand* scalar = in[0].scalar ? &in[0] : &in[1];
  if (!scalar->scalar || tensor->value < 0) {
    return Unsupported(absl::StrCat(op, " compares other than a layer's output with a number"));
  }
  const float v = static_cast<float>(*scalar->scalar);
  if (tensor->rank == 3) {
    SymbolicMask m;
    m.form = Form::kFeatureNotEqual;
    m.not_equal = {MaskOrigin::Kind::kAnyFeature, tensor->value, v};
    return m;
  }
  if (tensor->rank == 2) {
    return Steps(Form::kSteps, {{MaskOrigin::Kind::kIds, tensor->value, v}});
  }
  return Unsupported(absl::StrCat(op, " reads a tensor of rank ", tensor->rank,
                                  " (expected [B, T, F] features or [B, T] ids)"));
}

}  // namespace

bool IsOpLayer(const Json& layer, int keras_major) {
  const std::string module = Get<std::string>(layer, "module", "");
  if (absl::StartsWith(module, "keras.src.ops") || absl::StartsWith(module, "keras.ops")) {
    return true;
  }
  // Keras 3's legacy .h5 drops `module`; an op's config holds its name and arguments only,
  // where every layer's holds `trainable` (and `dtype`).
  if (keras_major < 3 || !module.empty()) return false;
  const Json* config = Find(layer, "config");
  return config && config->is_object() && !config->contains("trainable");
}

SymbolicMask EvalMaskOp(const std::string& name, const std::string& cls, const Json& config,
                        const std::vector<MaskOperand>& in) {
  if (const SymbolicMask* bad = FirstUnsupported(in)) return *bad;
  const std::string op = absl::StrCat("'", name, "' (", cls, ")");
  auto sym = [&](size_t i) -> const SymbolicMask* {
    return i < in.size() ? in[i].symbolic : nullptr;
  };
  if (cls == "NotEqual") return EvalNotEqual(op, in);
  if (cls == "Any") {
    const SymbolicMask* a = sym(0);
    if (in.size() != 1 || !a) return Unsupported(absl::StrCat(op, " reduces other than a mask"));
    if (Get<bool>(config, "keepdims", false)) {
      return Unsupported(absl::StrCat(op, " keeps the reduced axis"));
    }
    if (a->form == Form::kFeatureNotEqual && IsLastAxis(config, 3)) {
      return Steps(Form::kSteps, {a->not_equal});
    }
    if (a->form == Form::kStepsBroadcast && IsLastAxis(config, 3)) {
      return Steps(Form::kSteps, a->any_of);
    }
    return Unsupported(absl::StrCat(op, " reduces a mask over other than its feature axis"));
  }
  if (cls == "ExpandDims") {
    const SymbolicMask* a = sym(0);
    if (in.size() == 1 && a && a->form == Form::kSteps && IsLastAxis(config, 3)) {
      return Steps(Form::kStepsBroadcast, a->any_of);
    }
    return Unsupported(absl::StrCat(op, " expands other than a step mask's last axis"));
  }
  if (cls == "ZerosLike") {
    if (in.size() == 1 && in[0].value >= 0 && Get<std::string>(config, "dtype", "") == "bool") {
      SymbolicMask m;
      m.form = Form::kFalse;
      return m;
    }
    return Unsupported(absl::StrCat(op, " is not a boolean zeros_like of a layer's output"));
  }
  if (cls == "LogicalOr" || cls == "Concatenate") {
    // LogicalOr of two step masks; or the broadcast pieces Keras 3's Concatenate layer ORs.
    if (cls == "Concatenate" && !IsLastAxis(config, 3)) {
      return Unsupported(absl::StrCat(op, " concatenates masks over other than the last axis"));
    }
    std::vector<MaskOrigin> all;
    int steps = 0, broadcast = 0;
    for (const MaskOperand& o : in) {
      if (!o.symbolic) return Unsupported(absl::StrCat(op, " reads other than a mask"));
      if (o.symbolic->form == Form::kSteps) ++steps;
      if (o.symbolic->form == Form::kStepsBroadcast) ++broadcast;
      if (o.symbolic->form == Form::kFeatureNotEqual) {
        return Unsupported(absl::StrCat(op, " reads a feature-wise comparison"));
      }
      all.insert(all.end(), o.symbolic->any_of.begin(), o.symbolic->any_of.end());
    }
    if (steps == static_cast<int>(in.size()) && steps > 0) return Steps(Form::kSteps, all);
    if (steps == 0 && broadcast > 0) return Steps(Form::kStepsBroadcast, all);
    return Unsupported(absl::StrCat(op, " mixes masks of different shapes"));
  }
  return Unsupported(absl::StrCat(op,
                                  " is not one of the mask ops rnnserve maps (NotEqual, Any, "
                                  "ExpandDims, ZerosLike, LogicalOr, Concatenate)"));
}

std::optional<MaskOrigin> OutputMask(const engine::LayerSpec& spec,
                                     const std::vector<std::optional<MaskOrigin>>& input_masks,
                                     int input_value, int output_index) {
  const std::optional<MaskOrigin> kept = input_masks.empty() ? std::nullopt : input_masks.front();
  return std::visit(
      [&](const auto& s) -> std::optional<MaskOrigin> {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, engine::MaskingSpec>) {
          return MaskOrigin{MaskOrigin::Kind::kAnyFeature, input_value, s.mask_value};
        } else if constexpr (std::is_same_v<S, engine::EmbeddingSpec>) {
          if (s.mask_zero) return MaskOrigin{MaskOrigin::Kind::kIds, input_value, 0.0f};
          return kept;
        } else if constexpr (std::is_same_v<S, engine::RecurrentSpec>) {
          // Sequence outputs (two for a Bidirectional merge_mode=None) keep it; states do not.
          const int seq_outputs =
              (s.merge == engine::MergeMode::kNone && s.directions.size() == 2) ? 2 : 1;
          if (s.return_sequences && output_index < seq_outputs) return kept;
          return std::nullopt;
        } else if constexpr (std::is_same_v<S, engine::DenseSpec> ||
                             std::is_same_v<S, engine::ActivationSpec> ||
                             std::is_same_v<S, engine::IdentitySpec> ||
                             std::is_same_v<S, engine::SoftmaxSpec> ||
                             std::is_same_v<S, engine::BatchNormSpec> ||
                             std::is_same_v<S, engine::LayerNormSpec>) {
          return kept;
        } else if constexpr (std::is_same_v<S, engine::MergeSpec>) {
          // The IR ANDs the inputs' masks (none: all valid), Keras 3 ORs them: the two agree
          // only where every input carries the same mask.
          std::optional<MaskOrigin> common;
          bool any = false, all = true;
          for (const auto& m : input_masks) {
            if (!m) {
              all = false;
              continue;
            }
            if (any && !(*m == *common)) return MaskOrigin{};
            any = true;
            common = m;
          }
          if (!any) return std::nullopt;
          return all ? common : MaskOrigin{};
        } else {
          return std::nullopt;  // Conv1D, pools, Flatten, Reshape, RepeatVector drop it
        }
      },
      spec);
}

std::string DescribeMask(const std::optional<MaskOrigin>& mask) {
  if (!mask) return "no mask";
  switch (mask->kind) {
    case MaskOrigin::Kind::kAnyFeature:
      return absl::StrCat("the mask of Masking(mask_value=", mask->value, ")");
    case MaskOrigin::Kind::kIds:
      return absl::StrCat("the mask of ids != ", mask->value, " (Embedding mask_zero)");
    case MaskOrigin::Kind::kOther:
      break;
  }
  return "the merge of differently masked inputs";
}

}  // namespace rnnserve::models::keras
