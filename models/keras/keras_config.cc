#include "models/keras/keras_config.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/keras/keras_json.h"
#include "models/keras/keras_layers.h"
#include "models/keras/keras_mask.h"
#include "models/keras/keras_recurrent.h"

namespace rnnserve::models::keras {
namespace {

// [layer name, node index, tensor index]: how Keras configs refer to a layer's output.
using Ref = std::tuple<std::string, int, int>;

// Rank (batch axis included) of a layer's first output, from its input's rank; -1: unknown.
int OutputRank(const engine::LayerSpec& spec, int in) {
  if (const auto* r = std::get_if<engine::RecurrentSpec>(&spec)) return r->return_sequences ? 3 : 2;
  if (std::holds_alternative<engine::EmbeddingSpec>(spec)) return in < 0 ? -1 : in + 1;
  if (std::holds_alternative<engine::Conv1DSpec>(spec) ||
      std::holds_alternative<engine::Pool1DSpec>(spec) ||
      std::holds_alternative<engine::RepeatVectorSpec>(spec)) {
    return 3;
  }
  if (std::holds_alternative<engine::GlobalPool1DSpec>(spec) ||
      std::holds_alternative<engine::FlattenSpec>(spec)) {
    return 2;
  }
  if (const auto* r = std::get_if<engine::ReshapeSpec>(&spec)) {
    return 1 + static_cast<int>(r->target.size());
  }
  return in;
}

class Converter {
 public:
  Converter(const KerasSource& source, const WeightSource& weights)
      : source_(source), weights_(weights) {
    ctx_.file = source.file;
    std::vector<std::string> parts = absl::StrSplit(source.keras_version, '.');
    int v = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &v)) ctx_.keras_major = v;
    if (parts.size() > 1 && absl::SimpleAtoi(parts[1], &v)) ctx_.keras_minor = v;
  }

  absl::StatusOr<engine::Model> Build(const Json& model_config);

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_.file, ": ", what));
  }
  absl::Status AddInput(const std::string& name, const Json& config);
  // Adds `layer` (class + config) reading `inputs`; returns its output value ids.
  absl::StatusOr<std::vector<int>> AddLayer(const Json& layer, const std::vector<int>& inputs);
  absl::StatusOr<std::vector<Array>> Weights(const std::string& layer, const std::string& cls);
  absl::Status BuildSequential(const Json& cfg);
  absl::Status BuildFunctional(const Json& cfg);
  // Keras 3 functional graphs: op layers that compute masks, and the `mask` a layer is given.
  absl::Status AddOpLayer(const Json& layer, const std::string& name,
                          const std::map<Ref, int>& produced);
  // The value `layer` reads as its first input once its `mask` argument is mapped: `input`
  // where that mask is the one `input` carries, or a Masking layer put in front of a
  // recurrent layer whose input carries none.
  absl::StatusOr<int> MaskedInput(const std::string& layer, const std::string& cls,
                                  const Json& mask, int input, const std::map<Ref, int>& produced);

  // Symbolic values of Keras 3 op layers, which never become IR values.
  std::map<Ref, SymbolicMask> symbolic_;

  const KerasSource& source_;
  const WeightSource& weights_;
  LayerContext ctx_;
  engine::Model model_;
  std::vector<int> rank_;                        // per value id; -1 where unknown
  std::vector<std::optional<MaskOrigin>> mask_;  // per value id: the mask the IR gives it
  std::vector<std::string> value_name_;          // per value id: the layer that makes it
};

absl::StatusOr<std::vector<Array>> Converter::Weights(const std::string& layer,
                                                      const std::string& cls) {
  auto arrays = weights_(layer);
  if (!arrays.ok()) return arrays.status();
  for (size_t i = 0; i < arrays->size(); ++i) {
    for (float v : (*arrays)[i].data) {
      if (!std::isfinite(v)) {
        return LayerError(ctx_, layer, cls,
                          absl::StrCat("weight array ", i, " holds a non-finite value (", v,
                                       "); expected finite weights"));
      }
    }
  }
  return arrays;
}

absl::Status Converter::AddInput(const std::string& name, const Json& config) {
  const Json* shape = Find(config, "batch_input_shape");
  if (!shape) shape = Find(config, "batch_shape");
  engine::ValueInfo info;
  info.name = name;
  if (shape && shape->is_array()) {
    for (const Json& d : *shape) {
      info.shape.push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
    }
    if (!info.shape.empty()) info.shape[0] = -1;  // the batch axis is always dynamic
  }
  const std::string dtype = Get<std::string>(config, "dtype", "float32");
  if (dtype.find("int") != std::string::npos) info.dtype = engine::DType::kInt64;
  rank_.push_back(info.shape.empty() ? -1 : static_cast<int>(info.shape.size()));
  mask_.push_back(std::nullopt);
  value_name_.push_back(name);
  model_.inputs.push_back(std::move(info));
  model_.num_values = static_cast<int>(model_.inputs.size());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> Converter::AddLayer(const Json& layer,
                                                     const std::vector<int>& inputs) {
  const std::string cls = Get<std::string>(layer, "class_name", "");
  const Json empty = Json::object();
  const Json* cfg = Find(layer, "config");
  const Json& config = cfg ? *cfg : empty;
  const std::string name = Get<std::string>(config, "name", Get<std::string>(layer, "name", cls));
  if (cls.empty()) return Error(absl::StrCat("layer '", name, "' has no class_name"));
  if (cls == "Sequential" || cls == "Functional" || cls == "Model") {
    return absl::UnimplementedError(
        absl::StrCat(source_.file, ": layer '", name, "' (", cls,
                     ") is a nested model, which rnnserve does not support; save the model "
                     "flattened"));
  }
  if (inputs.empty()) return Error(absl::StrCat("layer '", name, "' has no inputs"));

  auto arrays = Weights(name, cls);
  if (!arrays.ok()) return arrays.status();
  const int in_rank = rank_[inputs[0]];

  engine::Layer out;
  out.name = name;
  out.source_class = cls;
  out.inputs = inputs;
  if (IsRecurrentClass(cls)) {
    auto spec = ConvertRecurrentLayer(ctx_, name, cls, config, *arrays);
    if (!spec.ok()) return spec.status();
    out.spec = std::move(*spec);
  } else if (cls == "Bidirectional") {
    auto spec = ConvertBidirectional(ctx_, name, config, *arrays);
    if (!spec.ok()) return spec.status();
    out.spec = std::move(*spec);
  } else {
    auto spec = ConvertLayer(ctx_, name, cls, config, std::move(*arrays), in_rank);
    if (!spec.ok()) return spec.status();
    out.spec = std::move(*spec);
  }
  // Keras casts an Embedding's input to int whatever the InputLayer's dtype says.
  if (std::holds_alternative<engine::EmbeddingSpec>(out.spec) &&
      inputs[0] < static_cast<int>(model_.inputs.size())) {
    model_.inputs[inputs[0]].dtype = engine::DType::kInt64;
  }
  if (std::holds_alternative<engine::RecurrentSpec>(out.spec)) {
    if (in_rank > 0 && in_rank != 3) {
      return LayerError(ctx_, name, cls,
                        absl::StrCat("input has rank ", in_rank, ", expected 3 [B, T, F]"));
    }
    // Initial states passed as extra inputs are not read from the file (no weights).
    if (inputs.size() > 1) {
      return LayerError(ctx_, name, cls, "initial states wired in the graph are not supported");
    }
  }

  int n_out = 1;
  if (const auto* rnn = std::get_if<engine::RecurrentSpec>(&out.spec)) {
    const int dirs = static_cast<int>(rnn->directions.size());
    n_out = (rnn->merge == engine::MergeMode::kNone && dirs == 2) ? 2 : 1;
    if (rnn->return_state) n_out += dirs * (rnn->cell == engine::CellType::kLstm ? 2 : 1);
  }
  const int first_rank = OutputRank(out.spec, in_rank);
  std::vector<std::optional<MaskOrigin>> in_masks;
  for (int v : inputs) in_masks.push_back(mask_[v]);
  for (int i = 0; i < n_out; ++i) {
    mask_.push_back(OutputMask(out.spec, in_masks, inputs[0], i));
    value_name_.push_back(name);
    out.outputs.push_back(model_.num_values++);
    // Every output after the sequence output(s) is a [B, H] state.
    const bool seq_out =
        i == 0 || (i == 1 && n_out > 1 &&
                   std::get<engine::RecurrentSpec>(out.spec).merge == engine::MergeMode::kNone &&
                   std::get<engine::RecurrentSpec>(out.spec).directions.size() == 2);
    rank_.push_back(seq_out ? first_rank : 2);
  }
  std::vector<int> ids = out.outputs;
  model_.layers.push_back(std::move(out));
  return ids;
}

// Collects [layer, node, tensor] references from a Keras 2 or Keras 3 inbound node.
void CollectRefs(const Json& node, std::vector<Ref>* refs) {
  if (node.is_object()) {
    if (const Json* cfg = Find(node, "config")) {
      if (const Json* hist = Find(*cfg, "keras_history")) {
        if (hist->is_array() && hist->size() >= 3 && (*hist)[0].is_string() &&
            (*hist)[1].is_number_integer() && (*hist)[2].is_number_integer()) {
          refs->emplace_back((*hist)[0].get<std::string>(), (*hist)[1].get<int>(),
                             (*hist)[2].get<int>());
          return;
        }
      }
    }
    if (const Json* args = Find(node, "args")) CollectRefs(*args, refs);
    return;
  }
  if (node.is_array()) {
    // Keras 2 reference: ["name", node_index, tensor_index, {kwargs}]
    if (node.size() >= 3 && node[0].is_string() && node[1].is_number_integer() &&
        node[2].is_number_integer()) {
      refs->emplace_back(node[0].get<std::string>(), node[1].get<int>(), node[2].get<int>());
      return;
    }
    for (const Json& item : node) CollectRefs(item, refs);
  }
}

std::vector<Ref> RefList(const Json& refs) {
  std::vector<Ref> out;
  CollectRefs(refs, &out);
  return out;
}

std::string LayerName(const Json& layer) {
  const Json* cfg = Find(layer, "config");
  return Get<std::string>(layer, "name", cfg ? Get<std::string>(*cfg, "name", "") : "");
}

absl::Status Converter::BuildSequential(const Json& cfg) {
  // Keras <= 2.2.2 stores the layer list itself; later versions {"name", "layers", ...}.
  const Json* layers_ptr = cfg.is_array() ? &cfg : Find(cfg, "layers");
  if (!layers_ptr || !layers_ptr->is_array() || layers_ptr->empty()) {
    return Error("Sequential model has no layers");
  }
  const Json& layers = *layers_ptr;
  model_.name = cfg.is_object() ? Get<std::string>(cfg, "name", "sequential") : "sequential";
  size_t first = 0;
  const std::string first_cls = Get<std::string>(layers[0], "class_name", "");
  const Json* first_cfg_ptr = Find(layers[0], "config");
  if (!first_cfg_ptr) return Error("Sequential model's first layer has no config");
  const Json& first_cfg = *first_cfg_ptr;
  if (first_cls == "InputLayer") {
    if (auto s = AddInput(Get<std::string>(first_cfg, "name", "input"), first_cfg); !s.ok()) {
      return s;
    }
    first = 1;
  } else {
    const Json* build = cfg.is_object() ? Find(cfg, "build_input_shape") : nullptr;
    Json shape_cfg = first_cfg;
    if (!Find(first_cfg, "batch_input_shape") && build) shape_cfg["batch_input_shape"] = *build;
    if (first_cls == "Embedding") shape_cfg["dtype"] = "int32";
    if (auto s = AddInput(Get<std::string>(first_cfg, "name", "input") + "_input", shape_cfg);
        !s.ok()) {
      return s;
    }
  }
  if (first >= layers.size()) return Error("Sequential model has only an input layer");
  int current = 0;
  for (size_t i = first; i < layers.size(); ++i) {
    auto outs = AddLayer(layers[i], {current});
    if (!outs.ok()) return outs.status();
    if (outs->size() != 1) {
      return Error(absl::StrCat("layer '", model_.layers.back().name,
                                "' has several outputs, which a Sequential model cannot pass on"));
    }
    current = (*outs)[0];
  }
  model_.output_values = {current};
  model_.outputs.push_back({model_.layers.back().name, engine::DType::kFloat32, {}});
  return absl::OkStatus();
}

absl::Status Converter::AddOpLayer(const Json& layer, const std::string& name,
                                   const std::map<Ref, int>& produced) {
  const std::string cls = Get<std::string>(layer, "class_name", "");
  const Json empty = Json::object();
  const Json* cfg = Find(layer, "config");
  const Json& nodes = layer["inbound_nodes"];
  for (size_t node = 0; node < nodes.size(); ++node) {
    // The op's arguments, a list argument (Concatenate's) flattened.
    std::vector<MaskOperand> operands;
    std::string bad;
    std::function<void(const Json&)> collect = [&](const Json& arg) {
      if (arg.is_number()) {
        operands.push_back({.scalar = arg.get<double>()});
        return;
      }
      if (arg.is_array()) {
        for (const Json& item : arg) collect(item);
        return;
      }
      const std::vector<Ref> refs = RefList(arg);
      if (refs.size() != 1) {
        bad = absl::StrCat("an argument of '", name, "' (", cls, ") is ", arg.dump());
        return;
      }
      if (auto sym = symbolic_.find(refs[0]); sym != symbolic_.end()) {
        operands.push_back({.symbolic = &sym->second});
      } else if (auto it = produced.find(refs[0]); it != produced.end()) {
        operands.push_back({.value = it->second, .rank = rank_[it->second]});
      } else {
        bad = absl::StrCat("'", name, "' reads '", std::get<0>(refs[0]), "' before it is defined");
      }
    };
    const Json* args = Find(nodes[node], "args");
    if (args) collect(*args);
    SymbolicMask result = bad.empty() ? EvalMaskOp(name, cls, cfg ? *cfg : empty, operands)
                                      : SymbolicMask{.why = bad};
    symbolic_[{name, static_cast<int>(node), 0}] = std::move(result);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Converter::MaskedInput(const std::string& layer, const std::string& cls,
                                           const Json& mask, int input,
                                           const std::map<Ref, int>& produced) {
  const std::vector<Ref> refs = RefList(mask);
  if (refs.empty()) return input;  // mask=None
  auto refuse = [&](const std::string& what) {
    return LayerError(ctx_, layer, cls,
                      absl::StrCat("its `mask` argument ", what,
                                   "; rnnserve maps a mask only where it is the mask of a "
                                   "Masking layer or of Embedding(mask_zero=True) reaching the "
                                   "layer's input (docs/import-keras.md)"));
  };
  const std::string from = std::get<0>(refs[0]);
  auto sym = symbolic_.find(refs[0]);
  if (refs.size() != 1 || sym == symbolic_.end()) {
    return refuse(absl::StrCat("comes from '", from, "'",
                               produced.count(refs[0]) ? ", a layer's output" : ""));
  }
  const SymbolicMask& m = sym->second;
  if (m.form == SymbolicMask::Form::kUnsupported) {
    return refuse(absl::StrCat("(from '", from, "') cannot be mapped: ", m.why));
  }
  if (m.form != SymbolicMask::Form::kSteps) {
    return refuse(absl::StrCat("(from '", from, "') is not a [B, T] step mask"));
  }
  if (m.any_of.size() != 1) {
    return refuse(absl::StrCat("(from '", from, "') is the OR of ", m.any_of.size(),
                               " different masks, which the IR cannot express"));
  }
  const MaskOrigin& want = m.any_of[0];
  if (mask_[input] && *mask_[input] == want) return input;
  if (!mask_[input] && want.kind == MaskOrigin::Kind::kAnyFeature && want.source == input &&
      (IsRecurrentClass(cls) || cls == "Bidirectional") && rank_[input] == 3) {
    // mask=any(x != v, axis=-1) on the layer's own input: a Masking layer in front of it gives
    // the same mask; the zeros it writes at masked steps are never read (the recurrent layer
    // carries its state over them).
    engine::Layer masking;
    masking.name = absl::StrCat(layer, "/mask");
    masking.source_class = "Masking";
    masking.spec = engine::MaskingSpec{want.value};
    masking.inputs = {input};
    masking.outputs = {model_.num_values++};
    rank_.push_back(3);
    mask_.push_back(want);
    value_name_.push_back(masking.name);
    model_.layers.push_back(std::move(masking));
    return model_.num_values - 1;
  }
  return refuse(absl::StrCat("(from '", from, "') is ", DescribeMask(want), " of '",
                             value_name_[want.source], "', but its input '", value_name_[input],
                             "' carries ", DescribeMask(mask_[input])));
}

absl::Status Converter::BuildFunctional(const Json& cfg) {
  model_.name = Get<std::string>(cfg, "name", "model");
  const Json* layers = Find(cfg, "layers");
  if (!layers || !layers->is_array()) return Error("functional model has no layer list");
  std::map<Ref, int> produced;
  const Json* input_layers = Find(cfg, "input_layers");
  if (!input_layers) return Error("functional model has no input_layers");
  for (const Ref& ref : RefList(*input_layers)) {
    const std::string& in_name = std::get<0>(ref);
    const Json* in_layer = nullptr;
    for (const Json& l : *layers) {
      if (LayerName(l) == in_name) in_layer = &l;
    }
    if (!in_layer || !Find(*in_layer, "config")) {
      return Error(absl::StrCat("input layer '", in_name, "' not found"));
    }
    if (auto s = AddInput(in_name, (*in_layer)["config"]); !s.ok()) return s;
    produced[{in_name, 0, 0}] = model_.num_values - 1;
  }
  if (model_.inputs.empty()) return Error("functional model has no inputs");
  for (const Json& layer : *layers) {
    const std::string lcls = Get<std::string>(layer, "class_name", "");
    if (lcls == "InputLayer") continue;
    const std::string lname = LayerName(layer);
    const Json* nodes = Find(layer, "inbound_nodes");
    if (!nodes || !nodes->is_array() || nodes->empty()) {
      return Error(absl::StrCat("layer '", lname, "' is not connected"));
    }
    if (IsOpLayer(layer, ctx_.keras_major)) {
      if (auto s = AddOpLayer(layer, lname, produced); !s.ok()) return s;
      continue;
    }
    for (size_t node = 0; node < nodes->size(); ++node) {
      std::vector<int> inputs;
      for (const Ref& ref : RefList((*nodes)[node])) {
        if (auto sym = symbolic_.find(ref); sym != symbolic_.end()) {
          return Error(absl::StrCat("layer '", lname, "' (", lcls, ") reads '", std::get<0>(ref),
                                    "', a Keras op, which rnnserve maps only inside the mask "
                                    "passed to a layer's `mask` argument"));
        }
        auto it = produced.find(ref);
        if (it == produced.end()) {
          return Error(absl::StrCat("layer '", lname, "' reads '", std::get<0>(ref),
                                    "' before it is defined"));
        }
        inputs.push_back(it->second);
      }
      // Keras 3 passes tensors other than the inputs as keyword arguments.
      const Json* kwargs = Find((*nodes)[node], "kwargs");
      if (kwargs && kwargs->is_object()) {
        for (const auto& [key, arg] : kwargs->items()) {
          if (key == "mask" || RefList(arg).empty()) continue;
          return Error(absl::StrCat(
              "layer '", lname, "' (", lcls, ") takes '", key, "' from the graph; ",
              key == "initial_state" ? "initial states wired in the graph are not supported"
                                     : "rnnserve reads only a layer's inputs and its mask"));
        }
        if (const Json* mask = Find(*kwargs, "mask"); mask && !inputs.empty()) {
          auto masked = MaskedInput(lname, lcls, *mask, inputs[0], produced);
          if (!masked.ok()) return masked.status();
          inputs[0] = *masked;
        }
      }
      auto outs = AddLayer(layer, inputs);
      if (!outs.ok()) return outs.status();
      for (size_t t = 0; t < outs->size(); ++t) {
        produced[{lname, static_cast<int>(node), static_cast<int>(t)}] = (*outs)[t];
      }
    }
  }
  const Json* output_layers = Find(cfg, "output_layers");
  if (!output_layers) return Error("functional model has no output_layers");
  std::set<std::string> used_names;
  std::map<std::string, int> suffix;
  for (const Ref& ref : RefList(*output_layers)) {
    if (symbolic_.count(ref)) {
      return Error(absl::StrCat("output '", std::get<0>(ref),
                                "' is a Keras op, which rnnserve maps only inside a mask"));
    }
    auto it = produced.find(ref);
    if (it == produced.end()) {
      return Error(absl::StrCat("output layer '", std::get<0>(ref), "' not found"));
    }
    // Output names as Keras makes them unique: lstm, lstm_1, lstm_2 for a layer's three
    // outputs (return_state).
    const std::string& layer = std::get<0>(ref);
    std::string proposal = layer;
    while (used_names.count(proposal)) {
      int& count = suffix[layer];
      proposal = absl::StrCat(layer, "_", ++count);
    }
    used_names.insert(proposal);
    model_.output_values.push_back(it->second);
    model_.outputs.push_back({proposal, engine::DType::kFloat32, {}});
  }
  if (model_.output_values.empty()) return Error("functional model has no outputs");
  return absl::OkStatus();
}

absl::StatusOr<engine::Model> Converter::Build(const Json& model_config) {
  const std::string cls = Get<std::string>(model_config, "class_name", "");
  const Json* cfg = Find(model_config, "config");
  if (!cfg) return Error("model_config has no 'config'");
  model_.source_format = source_.format;
  model_.producer = absl::StrCat("keras ", source_.keras_version);
  absl::Status status;
  if (cls == "Sequential") {
    status = BuildSequential(*cfg);
  } else if (cls == "Model" || cls == "Functional") {
    status = BuildFunctional(*cfg);
  } else {
    return Error(absl::StrCat("model class '", cls,
                              "' is not supported (expected Sequential, Model or Functional)"));
  }
  if (!status.ok()) return status;
  return std::move(model_);
}

}  // namespace

absl::StatusOr<engine::Model> BuildModel(const nlohmann::json& model_config,
                                         const KerasSource& source, const WeightSource& weights) {
  try {
    Converter converter(source, weights);
    return converter.Build(model_config);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.file, ": malformed model config: ", e.what()));
  }
}

}  // namespace rnnserve::models::keras
