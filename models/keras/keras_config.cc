#include "models/keras/keras_config.h"

#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::models::keras {
namespace {

using engine::Activation;
using engine::ActivationKind;
using Json = nlohmann::json;

class Converter {
 public:
  Converter(const KerasSource& source, const WeightSource& weights)
      : source_(source), weights_(weights) {
    std::vector<std::string> parts = absl::StrSplit(source.keras_version, '.');
    int major = 2;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &major)) keras_major_ = major;
  }

  absl::StatusOr<engine::Model> Build(const Json& model_config);

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_.file, ": ", what));
  }
  absl::Status LayerError(const std::string& layer, const std::string& what) const {
    return Error(absl::StrCat("layer '", layer, "': ", what));
  }

  absl::StatusOr<Activation> ParseActivation(const std::string& layer, const Json& value) const;
  // Adds `layer` (class + config) reading `inputs`; returns its output value ids.
  absl::StatusOr<std::vector<int>> AddLayer(const Json& layer, const std::vector<int>& inputs);
  absl::StatusOr<engine::RecurrentSpec> ConvertRecurrent(const std::string& name,
                                                         const std::string& cls,
                                                         const Json& config,
                                                         const std::vector<Array>& arrays,
                                                         size_t* used, bool backward_half);
  absl::StatusOr<engine::DenseSpec> ConvertDense(const std::string& name, const Json& config,
                                                 const std::vector<Array>& arrays);
  absl::StatusOr<std::vector<Array>> Weights(const std::string& layer) {
    return weights_(layer);
  }
  int NewValue() { return model_.num_values++; }
  absl::Status AddInput(const std::string& name, const Json& config);

  const KerasSource& source_;
  const WeightSource& weights_;
  int keras_major_ = 2;
  engine::Model model_;
};

const Json* Find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

template <typename T>
T Get(const Json& obj, const char* key, T fallback) {
  const Json* v = Find(obj, key);
  if (!v) return fallback;
  try {
    return v->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

absl::StatusOr<Activation> Converter::ParseActivation(const std::string& layer,
                                                      const Json& value) const {
  std::string name = "linear";
  if (value.is_string()) {
    name = value.get<std::string>();
  } else if (value.is_object()) {
    // Keras 3 may serialise {"class_name": "function", "config": "relu", ...}.
    const Json* cfg = Find(value, "config");
    if (cfg && cfg->is_string()) name = cfg->get<std::string>();
    else name = Get<std::string>(value, "class_name", "?");
  } else if (!value.is_null()) {
    return LayerError(layer, "unreadable activation");
  }
  if (name == "linear" || name == "None") return Activation::Of(ActivationKind::kLinear);
  if (name == "sigmoid") return Activation::Of(ActivationKind::kSigmoid);
  if (name == "tanh") return Activation::Of(ActivationKind::kTanh);
  if (name == "relu") return Activation::Of(ActivationKind::kRelu);
  if (name == "softmax") return Activation::Of(ActivationKind::kSoftmax);
  if (name == "elu") return Activation::Of(ActivationKind::kElu, 1.0f);
  if (name == "selu") return Activation::Of(ActivationKind::kSelu);
  if (name == "softplus") return Activation::Of(ActivationKind::kSoftplus);
  if (name == "softsign") return Activation::Of(ActivationKind::kSoftsign);
  if (name == "swish" || name == "silu") return Activation::Of(ActivationKind::kSwish);
  if (name == "gelu") return Activation::Of(ActivationKind::kGelu);
  if (name == "exponential") return Activation::Of(ActivationKind::kExponential);
  if (name == "hard_sigmoid") {
    return keras_major_ >= 3 ? Activation::HardSigmoidKeras3() : Activation::HardSigmoidKeras2();
  }
  return LayerError(layer, absl::StrCat("activation '", name, "' is not supported"));
}

// Transposes a Keras kernel [rows, G*H] into canonical [G*H, rows], taking canonical gate g
// from Keras block order[g].
std::vector<float> ToCanonical(const Array& k, int gates, int H, const std::vector<int>& order) {
  const int64_t rows = k.shape[0];
  const int64_t cols = static_cast<int64_t>(gates) * H;
  std::vector<float> out(cols * rows);
  for (int g = 0; g < gates; ++g) {
    for (int j = 0; j < H; ++j) {
      const int64_t src_col = static_cast<int64_t>(order[g]) * H + j;
      float* dst = out.data() + (static_cast<int64_t>(g) * H + j) * rows;
      for (int64_t i = 0; i < rows; ++i) dst[i] = k.data[i * cols + src_col];
    }
  }
  return out;
}

std::vector<float> ReorderBias(const float* b, int gates, int H, const std::vector<int>& order) {
  std::vector<float> out(static_cast<size_t>(gates) * H);
  for (int g = 0; g < gates; ++g) {
    std::copy_n(b + static_cast<int64_t>(order[g]) * H, H, out.data() + g * H);
  }
  return out;
}

absl::StatusOr<engine::RecurrentSpec> Converter::ConvertRecurrent(
    const std::string& name, const std::string& cls, const Json& config,
    const std::vector<Array>& arrays, size_t* used, bool backward_half) {
  engine::RecurrentSpec spec;
  const bool cudnn = cls == "CuDNNLSTM" || cls == "CuDNNGRU";
  if (cls == "LSTM" || cls == "CuDNNLSTM") {
    spec.cell = engine::CellType::kLstm;
  } else if (cls == "GRU" || cls == "CuDNNGRU") {
    spec.cell = engine::CellType::kGru;
  } else {
    spec.cell = engine::CellType::kSimpleRnn;
  }
  const int H = Get<int>(config, "units", 0);
  if (H <= 0) return LayerError(name, "missing or bad 'units'");
  spec.hidden_size = H;
  spec.return_sequences = Get<bool>(config, "return_sequences", false);
  spec.return_state = Get<bool>(config, "return_state", false);
  const bool use_bias = cudnn || Get<bool>(config, "use_bias", true);
  // GRU before Keras 2.3 has no reset_after key and means False; CuDNNGRU is reset_after.
  spec.reset_after = cudnn || Get<bool>(config, "reset_after", false);

  engine::RecurrentDirection dir;
  if (cudnn) {
    dir.f = Activation::Of(ActivationKind::kSigmoid);
    dir.g = dir.h = Activation::Of(ActivationKind::kTanh);
  } else if (spec.cell == engine::CellType::kSimpleRnn) {
    auto act = ParseActivation(name, config.value("activation", Json("tanh")));
    if (!act.ok()) return act.status();
    dir.f = *act;
  } else {
    auto act = ParseActivation(name, config.value("activation", Json("tanh")));
    if (!act.ok()) return act.status();
    auto rec = ParseActivation(name, config.value("recurrent_activation", Json("sigmoid")));
    if (!rec.ok()) return rec.status();
    dir.f = *rec;
    dir.g = dir.h = *act;
  }

  const int G = spec.gates();
  const size_t need = use_bias ? 3 : 2;
  if (arrays.size() < *used + need) {
    return LayerError(name, absl::StrCat("expected ", need, " weight arrays, found ",
                                         arrays.size() - *used));
  }
  const Array& kernel = arrays[*used];
  const Array& recurrent = arrays[*used + 1];
  if (kernel.shape.size() != 2 || kernel.shape[1] != int64_t{G} * H) {
    return LayerError(name, absl::StrCat("kernel must be [I, ", G * H, "]"));
  }
  if (recurrent.shape.size() != 2 || recurrent.shape[0] != H || recurrent.shape[1] != G * H) {
    return LayerError(name, absl::StrCat("recurrent kernel must be [", H, ", ", G * H, "]"));
  }
  spec.input_size = static_cast<int>(kernel.shape[0]);
  const std::vector<int> order = spec.cell == engine::CellType::kGru ? std::vector<int>{1, 0, 2}
                                 : spec.cell == engine::CellType::kLstm
                                     ? std::vector<int>{0, 1, 2, 3}
                                     : std::vector<int>{0};
  dir.W = ToCanonical(kernel, G, H, order);
  dir.R = ToCanonical(recurrent, G, H, order);
  dir.bW.assign(G * H, 0.0f);
  dir.bR.assign(G * H, 0.0f);
  if (use_bias) {
    const Array& bias = arrays[*used + 2];
    const int64_t gh = int64_t{G} * H;
    if (bias.size() == gh) {
      dir.bW = ReorderBias(bias.data.data(), G, H, order);
    } else if (bias.size() == 2 * gh) {
      // [2, 3H] (GRU reset_after) or [8H]/[6H] (CuDNN): input biases, then recurrent biases.
      dir.bW = ReorderBias(bias.data.data(), G, H, order);
      dir.bR = ReorderBias(bias.data.data() + gh, G, H, order);
    } else {
      return LayerError(name, absl::StrCat("bias has ", bias.size(), " values, expected ", gh,
                                           " or ", 2 * gh));
    }
    if (spec.cell == engine::CellType::kGru && !spec.reset_after && bias.size() != gh) {
      return LayerError(name, "reset_after=False GRU with a two-row bias");
    }
    *used += 3;
  } else {
    *used += 2;
  }
  const bool go_backwards = Get<bool>(config, "go_backwards", false);
  if (backward_half) {
    dir.reverse = !go_backwards;
  } else if (go_backwards) {
    dir.reverse = true;
    dir.outputs_in_processing_order = true;
  }
  spec.directions.push_back(std::move(dir));
  return spec;
}

absl::StatusOr<engine::DenseSpec> Converter::ConvertDense(const std::string& name,
                                                          const Json& config,
                                                          const std::vector<Array>& arrays) {
  engine::DenseSpec spec;
  const bool use_bias = Get<bool>(config, "use_bias", true);
  if (arrays.size() != (use_bias ? 2u : 1u)) {
    return LayerError(name, absl::StrCat("expected ", use_bias ? 2 : 1,
                                         " weight arrays, found ", arrays.size()));
  }
  const Array& kernel = arrays[0];
  if (kernel.shape.size() != 2) return LayerError(name, "kernel must be 2-D");
  spec.in = static_cast<int>(kernel.shape[0]);
  spec.out = static_cast<int>(kernel.shape[1]);
  spec.kernel = kernel.data;
  if (use_bias) {
    if (arrays[1].size() != spec.out) return LayerError(name, "bias size differs from units");
    spec.bias = arrays[1].data;
  }
  auto act = ParseActivation(name, config.value("activation", Json("linear")));
  if (!act.ok()) return act.status();
  spec.activation = *act;
  return spec;
}

absl::Status Converter::AddInput(const std::string& name, const Json& config) {
  const Json* shape = Find(config, "batch_input_shape");
  if (!shape) shape = Find(config, "batch_shape");
  engine::ValueInfo info;
  info.name = name;
  if (shape && shape->is_array()) {
    for (const Json& d : *shape) info.shape.push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
  }
  const std::string dtype = Get<std::string>(config, "dtype", "float32");
  if (dtype.find("int") != std::string::npos) info.dtype = engine::DType::kInt64;
  model_.inputs.push_back(std::move(info));
  model_.num_values = static_cast<int>(model_.inputs.size());
  return absl::OkStatus();
}

bool IsRecurrentClass(const std::string& cls) {
  return cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN" || cls == "CuDNNLSTM" ||
         cls == "CuDNNGRU";
}

absl::StatusOr<std::vector<int>> Converter::AddLayer(const Json& layer,
                                                     const std::vector<int>& inputs) {
  const std::string cls = Get<std::string>(layer, "class_name", "");
  const Json empty = Json::object();
  const Json* cfg = Find(layer, "config");
  const Json& config = cfg ? *cfg : empty;
  const std::string name = Get<std::string>(config, "name", Get<std::string>(layer, "name", cls));

  engine::Layer out;
  out.name = name;
  out.source_class = cls;
  out.inputs = inputs;
  if (inputs.empty()) return LayerError(name, "has no inputs");

  auto arrays = Weights(name);
  if (!arrays.ok()) return arrays.status();

  if (IsRecurrentClass(cls)) {
    size_t used = 0;
    auto spec = ConvertRecurrent(name, cls, config, *arrays, &used, false);
    if (!spec.ok()) return spec.status();
    out.spec = std::move(*spec);
  } else if (cls == "Bidirectional") {
    const Json* inner = Find(config, "layer");
    if (!inner) return LayerError(name, "Bidirectional without an inner layer");
    const std::string inner_cls = Get<std::string>(*inner, "class_name", "");
    const Json& inner_cfg = (*inner)["config"];
    if (!IsRecurrentClass(inner_cls)) {
      return LayerError(name, absl::StrCat("Bidirectional over ", inner_cls, " is not supported"));
    }
    size_t used = 0;
    auto fw = ConvertRecurrent(name, inner_cls, inner_cfg, *arrays, &used, false);
    if (!fw.ok()) return fw.status();
    // The backward layer's config may differ only in go_backwards; Keras stores the inner one.
    const Json* bw_cfg_layer = Find(config, "backward_layer");
    const Json& bw_cfg = bw_cfg_layer ? (*bw_cfg_layer)["config"] : inner_cfg;
    auto bw = ConvertRecurrent(name, inner_cls, bw_cfg, *arrays, &used, true);
    if (!bw.ok()) return bw.status();
    fw->directions.push_back(std::move(bw->directions[0]));
    const std::string merge = Get<std::string>(config, "merge_mode", "");
    const Json* mm = Find(config, "merge_mode");
    if (!mm || merge == "None") {
      fw->merge = engine::MergeMode::kNone;
    } else if (merge == "concat") {
      fw->merge = engine::MergeMode::kConcat;
    } else if (merge == "sum") {
      fw->merge = engine::MergeMode::kSum;
    } else if (merge == "mul") {
      fw->merge = engine::MergeMode::kMul;
    } else if (merge == "ave") {
      fw->merge = engine::MergeMode::kAve;
    } else {
      return LayerError(name, absl::StrCat("unknown merge_mode '", merge, "'"));
    }
    // Keras forces zero outputs at masked steps in both halves when they return sequences.
    fw->zero_output_for_mask = fw->return_sequences;
    out.spec = std::move(*fw);
  } else if (cls == "Dense") {
    auto spec = ConvertDense(name, config, *arrays);
    if (!spec.ok()) return spec.status();
    out.spec = std::move(*spec);
  } else if (cls == "TimeDistributed") {
    const Json* inner = Find(config, "layer");
    const std::string inner_cls = inner ? Get<std::string>(*inner, "class_name", "") : "";
    if (inner_cls == "Dense") {
      auto spec = ConvertDense(name, (*inner)["config"], *arrays);
      if (!spec.ok()) return spec.status();
      out.spec = std::move(*spec);
    } else if (inner_cls == "Dropout" || inner_cls == "Activation") {
      out.spec = engine::IdentitySpec{};
      if (inner_cls == "Activation") {
        auto act = ParseActivation(name, (*inner)["config"].value("activation", Json("linear")));
        if (!act.ok()) return act.status();
        out.spec = engine::ActivationSpec{*act};
      }
    } else {
      out.spec = engine::UnsupportedSpec{absl::StrCat("TimeDistributed(", inner_cls, ")")};
    }
  } else if (cls == "Masking") {
    out.spec = engine::MaskingSpec{Get<float>(config, "mask_value", 0.0f)};
  } else if (cls == "Embedding") {
    if (arrays->size() != 1 || (*arrays)[0].shape.size() != 2) {
      return LayerError(name, "Embedding needs one [vocab, dim] table");
    }
    engine::EmbeddingSpec spec;
    spec.vocab = static_cast<int>((*arrays)[0].shape[0]);
    spec.dim = static_cast<int>((*arrays)[0].shape[1]);
    spec.table = std::move((*arrays)[0].data);
    spec.mask_zero = Get<bool>(config, "mask_zero", false);
    out.spec = std::move(spec);
  } else if (cls == "Activation") {
    auto act = ParseActivation(name, config.value("activation", Json("linear")));
    if (!act.ok()) return act.status();
    out.spec = engine::ActivationSpec{*act};
  } else if (cls == "Dropout" || cls == "SpatialDropout1D" || cls == "GaussianNoise" ||
             cls == "GaussianDropout" || cls == "AlphaDropout" || cls == "ActivityRegularization") {
    out.spec = engine::IdentitySpec{};
  } else {
    out.spec = engine::UnsupportedSpec{"no converter for this Keras layer class"};
  }

  int n_out = 1;
  if (const auto* rnn = std::get_if<engine::RecurrentSpec>(&out.spec)) {
    const int dirs = static_cast<int>(rnn->directions.size());
    n_out = (rnn->merge == engine::MergeMode::kNone && dirs == 2) ? 2 : 1;
    if (rnn->return_state) n_out += dirs * (rnn->cell == engine::CellType::kLstm ? 2 : 1);
  }
  for (int i = 0; i < n_out; ++i) out.outputs.push_back(NewValue());
  std::vector<int> ids = out.outputs;
  model_.layers.push_back(std::move(out));
  return ids;
}

// Collects [layer, node, tensor] references from a Keras 2 or Keras 3 inbound node.
void CollectHistory(const Json& node, std::vector<std::tuple<std::string, int, int>>* refs) {
  if (node.is_object()) {
    if (const Json* cfg = Find(node, "config")) {
      if (const Json* hist = Find(*cfg, "keras_history")) {
        if (hist->is_array() && hist->size() >= 3) {
          refs->emplace_back((*hist)[0].get<std::string>(), (*hist)[1].get<int>(),
                             (*hist)[2].get<int>());
          return;
        }
      }
    }
    if (const Json* args = Find(node, "args")) CollectHistory(*args, refs);
    return;
  }
  if (node.is_array()) {
    // Keras 2 reference: ["name", node_index, tensor_index, {kwargs}]
    if (node.size() >= 3 && node[0].is_string() && node[1].is_number_integer()) {
      refs->emplace_back(node[0].get<std::string>(), node[1].get<int>(), node[2].get<int>());
      return;
    }
    for (const Json& item : node) CollectHistory(item, refs);
  }
}

std::vector<std::tuple<std::string, int, int>> RefList(const Json& refs) {
  std::vector<std::tuple<std::string, int, int>> out;
  CollectHistory(refs, &out);
  return out;
}

absl::StatusOr<engine::Model> Converter::Build(const Json& model_config) {
  const std::string cls = Get<std::string>(model_config, "class_name", "");
  const Json* cfg = Find(model_config, "config");
  if (!cfg) return Error("model_config has no 'config'");
  model_.source_format = source_.format;
  model_.producer = absl::StrCat("keras ", source_.keras_version);

  if (cls == "Sequential") {
    const Json& layers = cfg->is_array() ? *cfg : (*cfg)["layers"];
    if (!layers.is_array() || layers.empty()) return Error("Sequential model has no layers");
    model_.name = cfg->is_object() ? Get<std::string>(*cfg, "name", "sequential") : "sequential";
    size_t first = 0;
    const std::string first_cls = Get<std::string>(layers[0], "class_name", "");
    const Json& first_cfg = layers[0]["config"];
    if (first_cls == "InputLayer") {
      if (auto s = AddInput(Get<std::string>(first_cfg, "name", "input"), first_cfg); !s.ok())
        return s;
      first = 1;
    } else {
      const Json* build = cfg->is_object() ? Find(*cfg, "build_input_shape") : nullptr;
      Json shape_cfg = first_cfg;
      if (!Find(first_cfg, "batch_input_shape") && build) shape_cfg["batch_input_shape"] = *build;
      if (first_cls == "Embedding") shape_cfg["dtype"] = "int32";
      if (auto s = AddInput(Get<std::string>(first_cfg, "name", "input") + "_input", shape_cfg);
          !s.ok())
        return s;
    }
    std::vector<int> current = {0};
    for (size_t i = first; i < layers.size(); ++i) {
      auto outs = AddLayer(layers[i], {current[0]});
      if (!outs.ok()) return outs.status();
      current = *outs;
    }
    model_.output_values = {current[0]};
    model_.outputs.push_back({model_.layers.back().name, engine::DType::kFloat32, {}});
  } else if (cls == "Model" || cls == "Functional") {
    model_.name = Get<std::string>(*cfg, "name", "model");
    const Json& layers = (*cfg)["layers"];
    if (!layers.is_array()) return Error("functional model has no layer list");
    std::map<std::tuple<std::string, int, int>, int> produced;
    for (const auto& ref : RefList((*cfg)["input_layers"])) {
      const std::string& in_name = std::get<0>(ref);
      const Json* in_layer = nullptr;
      for (const Json& l : layers) {
        if (Get<std::string>(l, "name", Get<std::string>(l["config"], "name", "")) == in_name) {
          in_layer = &l;
        }
      }
      if (!in_layer) return Error(absl::StrCat("input layer '", in_name, "' not found"));
      if (auto s = AddInput(in_name, (*in_layer)["config"]); !s.ok()) return s;
      produced[{in_name, 0, 0}] = model_.num_values - 1;
    }
    for (const Json& layer : layers) {
      const std::string lcls = Get<std::string>(layer, "class_name", "");
      if (lcls == "InputLayer") continue;
      const std::string lname =
          Get<std::string>(layer, "name", Get<std::string>(layer["config"], "name", ""));
      const Json& nodes = layer["inbound_nodes"];
      if (!nodes.is_array() || nodes.empty()) {
        return Error(absl::StrCat("layer '", lname, "' is not connected"));
      }
      for (size_t node = 0; node < nodes.size(); ++node) {
        std::vector<int> inputs;
        for (const auto& ref : RefList(nodes[node])) {
          auto it = produced.find(ref);
          if (it == produced.end()) {
            return Error(absl::StrCat("layer '", lname, "' reads '", std::get<0>(ref),
                                      "' before it is defined"));
          }
          inputs.push_back(it->second);
        }
        auto outs = AddLayer(layer, inputs);
        if (!outs.ok()) return outs.status();
        for (size_t t = 0; t < outs->size(); ++t) {
          produced[{lname, static_cast<int>(node), static_cast<int>(t)}] = (*outs)[t];
        }
      }
    }
    for (const auto& ref : RefList((*cfg)["output_layers"])) {
      auto it = produced.find(ref);
      if (it == produced.end()) {
        return Error(absl::StrCat("output layer '", std::get<0>(ref), "' not found"));
      }
      model_.output_values.push_back(it->second);
      model_.outputs.push_back({std::get<0>(ref), engine::DType::kFloat32, {}});
    }
  } else {
    return Error(absl::StrCat("model class '", cls, "' is not supported"));
  }
  return std::move(model_);
}

}  // namespace

absl::StatusOr<engine::Model> BuildModel(const nlohmann::json& model_config,
                                         const KerasSource& source,
                                         const WeightSource& weights) {
  try {
    Converter converter(source, weights);
    return converter.Build(model_config);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.file, ": malformed model config: ", e.what()));
  }
}

}  // namespace rnnserve::models::keras
