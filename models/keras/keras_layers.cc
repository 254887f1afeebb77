#include "models/keras/keras_layers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::models::keras {
namespace {

using engine::Activation;
using engine::ActivationKind;

std::string ShapeOf(const Array& a) { return absl::StrCat("[", absl::StrJoin(a.shape, ", "), "]"); }

// Weight count check shared by the converters.
absl::Status ExpectArrays(const LayerContext& ctx, const std::string& name, const std::string& cls,
                          const std::vector<Array>& arrays, size_t want, const char* what) {
  if (arrays.size() == want) return absl::OkStatus();
  return LayerError(
      ctx, name, cls,
      absl::StrCat("has ", arrays.size(), " weight arrays, expected ", want, " (", what, ")"));
}

// Keras's channels_last is the only layout the IR has.
absl::Status ExpectChannelsLast(const LayerContext& ctx, const std::string& name,
                                const std::string& cls, const Json& config) {
  const std::string fmt = Get<std::string>(config, "data_format", "channels_last");
  if (fmt == "channels_last") return absl::OkStatus();
  return LayerError(
      ctx, name, cls,
      absl::StrCat("data_format '", fmt, "' is not supported (expected channels_last)"));
}

// One axis (bare or a one-element list) as a negative index; only the last axis where `last`.
absl::StatusOr<int> ReadAxis(const LayerContext& ctx, const std::string& name,
                             const std::string& cls, const Json& config, int input_rank,
                             bool last_only) {
  const int raw = GetIntOrFirst(config, "axis", -1);
  const Json* v = Find(config, "axis");
  if (v && v->is_array() && v->size() != 1) {
    return LayerError(ctx, name, cls, "normalises over several axes; expected the last axis only");
  }
  int axis = raw;
  if (axis >= 0 && input_rank > 0) axis -= input_rank;
  if (axis >= 0) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("axis ", raw, " cannot be resolved (input rank unknown)"));
  }
  if (last_only && axis != -1) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("axis ", raw, " is not the last axis (expected -1)"));
  }
  return axis;
}

absl::StatusOr<engine::DenseSpec> ConvertDense(const LayerContext& ctx, const std::string& name,
                                               const std::string& cls, const Json& config,
                                               std::vector<Array> arrays) {
  engine::DenseSpec spec;
  const bool use_bias = Get<bool>(config, "use_bias", true);
  if (auto s = ExpectArrays(ctx, name, cls, arrays, use_bias ? 2 : 1,
                            use_bias ? "kernel, bias" : "kernel");
      !s.ok()) {
    return s;
  }
  const Array& kernel = arrays[0];
  const int units = Get<int>(config, "units", -1);
  if (kernel.shape.size() != 2 || (units > 0 && kernel.shape[1] != units)) {
    return LayerError(
        ctx, name, cls,
        absl::StrCat("kernel has shape ", ShapeOf(kernel), ", expected [in, ", units, "]"));
  }
  spec.in = static_cast<int>(kernel.shape[0]);
  spec.out = static_cast<int>(kernel.shape[1]);
  spec.kernel = std::move(arrays[0].data);  // [in, out]
  if (use_bias) {
    if (arrays[1].size() != spec.out) {
      return LayerError(
          ctx, name, cls,
          absl::StrCat("bias has shape ", ShapeOf(arrays[1]), ", expected [", spec.out, "]"));
    }
    spec.bias = std::move(arrays[1].data);  // [out]
  }
  const Json* act = Find(config, "activation");
  auto a = ParseActivation(ctx, name, cls, act ? *act : Json("linear"));
  if (!a.ok()) return a.status();
  spec.activation = *a;
  return spec;
}

// BatchNormalization weights: [gamma], [beta], moving_mean, moving_variance, each [C].
absl::StatusOr<engine::BatchNormSpec> ConvertBatchNorm(const LayerContext& ctx,
                                                       const std::string& name,
                                                       const std::string& cls, const Json& config,
                                                       std::vector<Array> arrays, int rank) {
  auto axis = ReadAxis(ctx, name, cls, config, rank, true);
  if (!axis.ok()) return axis.status();
  const bool scale = Get<bool>(config, "scale", true);
  const bool center = Get<bool>(config, "center", true);
  const size_t want = 2 + (scale ? 1 : 0) + (center ? 1 : 0);
  if (auto s = ExpectArrays(ctx, name, cls, arrays, want,
                            "[gamma], [beta], moving_mean, moving_variance");
      !s.ok()) {
    return s;
  }
  const int64_t C = arrays[0].size();
  for (const Array& a : arrays) {
    if (a.shape.size() != 1 || a.size() != C) {
      return LayerError(ctx, name, cls,
                        absl::StrCat("weight of shape ", ShapeOf(a), ", expected [", C, "]"));
    }
  }
  engine::BatchNormSpec spec;
  spec.epsilon = Get<float>(config, "epsilon", 1e-3f);
  size_t i = 0;
  if (scale) spec.gamma = std::move(arrays[i++].data);
  if (center) spec.beta = std::move(arrays[i++].data);
  spec.mean = std::move(arrays[i++].data);
  spec.variance = std::move(arrays[i++].data);
  for (float v : spec.variance) {
    if (v + spec.epsilon <= 0.0f) {
      return LayerError(ctx, name, cls, "moving_variance + epsilon must be positive");
    }
  }
  return spec;
}

absl::StatusOr<engine::LayerNormSpec> ConvertLayerNorm(const LayerContext& ctx,
                                                       const std::string& name,
                                                       const std::string& cls, const Json& config,
                                                       std::vector<Array> arrays, int rank) {
  auto axis = ReadAxis(ctx, name, cls, config, rank, true);
  if (!axis.ok()) return axis.status();
  if (Get<bool>(config, "rms_scaling", false)) {
    return LayerError(ctx, name, cls, "rms_scaling=True is not supported");
  }
  const bool scale = Get<bool>(config, "scale", true);
  const bool center = Get<bool>(config, "center", true);
  if (auto s = ExpectArrays(ctx, name, cls, arrays, (scale ? 1 : 0) + (center ? 1 : 0),
                            "[gamma], [beta]");
      !s.ok()) {
    return s;
  }
  if (arrays.size() == 2 && arrays[0].size() != arrays[1].size()) {
    return LayerError(ctx, name, cls, "gamma and beta differ in size");
  }
  engine::LayerNormSpec spec;
  spec.epsilon = Get<float>(config, "epsilon", 1e-3f);
  size_t i = 0;
  if (scale) spec.gamma = std::move(arrays[i++].data);
  if (center) spec.beta = std::move(arrays[i++].data);
  return spec;
}

absl::StatusOr<engine::Conv1DSpec> ConvertConv1D(const LayerContext& ctx, const std::string& name,
                                                 const std::string& cls, const Json& config,
                                                 std::vector<Array> arrays) {
  if (auto s = ExpectChannelsLast(ctx, name, cls, config); !s.ok()) return s;
  if (Get<int>(config, "groups", 1) != 1) {
    return LayerError(ctx, name, cls, "groups other than 1 are not supported");
  }
  engine::Conv1DSpec spec;
  spec.kernel_size = GetIntOrFirst(config, "kernel_size", 0);
  spec.stride = GetIntOrFirst(config, "strides", 1);
  spec.dilation = GetIntOrFirst(config, "dilation_rate", 1);
  if (spec.kernel_size <= 0 || spec.stride <= 0 || spec.dilation <= 0) {
    return LayerError(ctx, name, cls, "kernel_size, strides and dilation_rate must be positive");
  }
  if (spec.stride > 1 && spec.dilation > 1) {
    return LayerError(ctx, name, cls, "strides > 1 with dilation_rate > 1 is not valid in Keras");
  }
  const std::string padding = Get<std::string>(config, "padding", "valid");
  if (padding == "valid") {
    spec.padding = engine::Conv1DSpec::Padding::kValid;
  } else if (padding == "same") {
    spec.padding = engine::Conv1DSpec::Padding::kSame;
  } else if (padding == "causal") {
    spec.padding = engine::Conv1DSpec::Padding::kCausal;
  } else {
    return LayerError(ctx, name, cls,
                      absl::StrCat("padding '", padding, "' is not one of valid, same, causal"));
  }
  const bool use_bias = Get<bool>(config, "use_bias", true);
  if (auto s = ExpectArrays(ctx, name, cls, arrays, use_bias ? 2 : 1, "kernel, [bias]"); !s.ok()) {
    return s;
  }
  const Array& k = arrays[0];
  const int filters = Get<int>(config, "filters", -1);
  if (k.shape.size() != 3 || k.shape[0] != spec.kernel_size ||
      (filters > 0 && k.shape[2] != filters)) {
    return LayerError(ctx, name, cls,
                      absl::StrCat("kernel has shape ", ShapeOf(k), ", expected [",
                                   spec.kernel_size, ", Cin, ", filters, "]"));
  }
  spec.in_channels = static_cast<int>(k.shape[1]);
  spec.out_channels = static_cast<int>(k.shape[2]);
  spec.kernel = std::move(arrays[0].data);  // [kernel_size, Cin, Cout]
  if (use_bias) {
    if (arrays[1].size() != spec.out_channels) {
      return LayerError(ctx, name, cls,
                        absl::StrCat("bias has shape ", ShapeOf(arrays[1]), ", expected [",
                                     spec.out_channels, "]"));
    }
    spec.bias = std::move(arrays[1].data);
  }
  const Json* act = Find(config, "activation");
  auto a = ParseActivation(ctx, name, cls, act ? *act : Json("linear"));
  if (!a.ok()) return a.status();
  spec.activation = *a;
  return spec;
}

absl::StatusOr<engine::Pool1DSpec> ConvertPool1D(const LayerContext& ctx, const std::string& name,
                                                 const std::string& cls, const Json& config) {
  if (auto s = ExpectChannelsLast(ctx, name, cls, config); !s.ok()) return s;
  engine::Pool1DSpec spec;
  spec.kind = cls == "MaxPooling1D" || cls == "MaxPool1D" ? engine::Pool1DSpec::Kind::kMax
                                                          : engine::Pool1DSpec::Kind::kAverage;
  spec.pool_size = GetIntOrFirst(config, "pool_size", 2);
  spec.stride = GetIntOrFirst(config, "strides", spec.pool_size);  // null: pool_size
  const std::string padding = Get<std::string>(config, "padding", "valid");
  if (padding != "valid" && padding != "same") {
    return LayerError(ctx, name, cls,
                      absl::StrCat("padding '", padding, "' is not one of valid, same"));
  }
  spec.same_padding = padding == "same";
  if (spec.pool_size <= 0 || spec.stride <= 0) {
    return LayerError(ctx, name, cls, "pool_size and strides must be positive");
  }
  return spec;
}

absl::StatusOr<engine::MergeSpec> ConvertMerge(const LayerContext& ctx, const std::string& name,
                                               const std::string& cls, const Json& config,
                                               int rank) {
  using Kind = engine::MergeSpec::Kind;
  engine::MergeSpec spec;
  if (cls == "Concatenate") {
    spec.kind = Kind::kConcatenate;
    auto axis = ReadAxis(ctx, name, cls, config, rank, false);
    if (!axis.ok()) return axis.status();
    spec.axis = *axis;
  } else if (cls == "Add") {
    spec.kind = Kind::kAdd;
  } else if (cls == "Subtract") {
    spec.kind = Kind::kSubtract;
  } else if (cls == "Multiply") {
    spec.kind = Kind::kMultiply;
  } else if (cls == "Average") {
    spec.kind = Kind::kAverage;
  } else if (cls == "Maximum") {
    spec.kind = Kind::kMaximum;
  } else {
    spec.kind = Kind::kMinimum;
  }
  return spec;
}

bool IsIdentityClass(const std::string& cls) {
  return cls == "Dropout" || cls == "SpatialDropout1D" || cls == "GaussianNoise" ||
         cls == "GaussianDropout" || cls == "AlphaDropout" || cls == "ActivityRegularization";
}

bool IsMergeClass(const std::string& cls) {
  return cls == "Concatenate" || cls == "Add" || cls == "Subtract" || cls == "Multiply" ||
         cls == "Average" || cls == "Maximum" || cls == "Minimum";
}

}  // namespace

absl::Status LayerError(const LayerContext& ctx, const std::string& name, const std::string& cls,
                        const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(ctx.file, ": layer '", name, "' (", cls, "): ", what));
}

absl::StatusOr<Activation> ParseActivation(const LayerContext& ctx, const std::string& name,
                                           const std::string& cls, const Json& value) {
  std::string act = "linear";
  if (value.is_string()) {
    act = value.get<std::string>();
  } else if (value.is_object()) {
    // Keras 3 may write {"module": "keras.activations", "class_name": "function",
    // "config": "relu", ...}.
    const Json* cfg = Find(value, "config");
    act = cfg && cfg->is_string() ? cfg->get<std::string>()
                                  : Get<std::string>(value, "class_name", "?");
  } else if (!value.is_null()) {
    return LayerError(ctx, name, cls, "unreadable activation");
  }
  if (act == "linear" || act == "None") return Activation::Of(ActivationKind::kLinear);
  if (act == "sigmoid") return Activation::Of(ActivationKind::kSigmoid);
  if (act == "tanh") return Activation::Of(ActivationKind::kTanh);
  if (act == "relu") return Activation::Of(ActivationKind::kRelu);
  if (act == "softmax") return Activation::Of(ActivationKind::kSoftmax);
  if (act == "elu") return Activation::Of(ActivationKind::kElu, 1.0f);
  if (act == "selu") return Activation::Of(ActivationKind::kSelu);
  if (act == "softplus") return Activation::Of(ActivationKind::kSoftplus);
  if (act == "softsign") return Activation::Of(ActivationKind::kSoftsign);
  if (act == "swish" || act == "silu") return Activation::Of(ActivationKind::kSwish);
  if (act == "gelu") return Activation::Of(ActivationKind::kGelu);
  if (act == "exponential") return Activation::Of(ActivationKind::kExponential);
  if (act == "hard_sigmoid") {
    return ctx.keras_major >= 3 ? Activation::HardSigmoidKeras3() : Activation::HardSigmoidKeras2();
  }
  return LayerError(ctx, name, cls, absl::StrCat("activation '", act, "' is not supported"));
}

absl::StatusOr<engine::LayerSpec> ConvertLayer(const LayerContext& ctx, const std::string& name,
                                               const std::string& cls, const Json& config,
                                               std::vector<Array> arrays, int input_rank) {
  auto no_weights = [&]() -> absl::Status {
    return ExpectArrays(ctx, name, cls, arrays, 0, "none");
  };
  if (cls == "Dense") return ConvertDense(ctx, name, cls, config, std::move(arrays));
  if (cls == "TimeDistributed") {
    const Json* inner = Find(config, "layer");
    const std::string inner_cls = inner ? Get<std::string>(*inner, "class_name", "") : "";
    const Json* inner_cfg = inner ? Find(*inner, "config") : nullptr;
    if (inner_cls == "Dense" && inner_cfg) {
      return ConvertDense(ctx, name, "TimeDistributed(Dense)", *inner_cfg, std::move(arrays));
    }
    if ((IsIdentityClass(inner_cls) || inner_cls == "Activation") && inner_cfg) {
      return ConvertLayer(ctx, name, inner_cls, *inner_cfg, std::move(arrays), input_rank);
    }
    return absl::UnimplementedError(
        absl::StrCat(ctx.file, ": layer '", name, "' (TimeDistributed(", inner_cls,
                     ")): only TimeDistributed(Dense), (Activation) and (Dropout) are supported"));
  }
  if (cls == "Masking") {
    if (auto s = no_weights(); !s.ok()) return s;
    return engine::MaskingSpec{Get<float>(config, "mask_value", 0.0f)};
  }
  if (cls == "Embedding") {
    if (auto s = ExpectArrays(ctx, name, cls, arrays, 1, "embeddings"); !s.ok()) return s;
    const Array& t = arrays[0];
    const int vocab = Get<int>(config, "input_dim", -1);
    const int dim = Get<int>(config, "output_dim", -1);
    if (t.shape.size() != 2 || (vocab > 0 && t.shape[0] != vocab) ||
        (dim > 0 && t.shape[1] != dim)) {
      return LayerError(
          ctx, name, cls,
          absl::StrCat("table has shape ", ShapeOf(t), ", expected [", vocab, ", ", dim, "]"));
    }
    engine::EmbeddingSpec spec;
    spec.vocab = static_cast<int>(t.shape[0]);
    spec.dim = static_cast<int>(t.shape[1]);
    spec.table = std::move(arrays[0].data);  // [vocab, dim]
    spec.mask_zero = Get<bool>(config, "mask_zero", false);
    return spec;
  }
  if (cls == "Activation") {
    if (auto s = no_weights(); !s.ok()) return s;
    const Json* act = Find(config, "activation");
    auto a = ParseActivation(ctx, name, cls, act ? *act : Json("linear"));
    if (!a.ok()) return a.status();
    return engine::ActivationSpec{*a};
  }
  if (cls == "Softmax") {
    if (auto s = no_weights(); !s.ok()) return s;
    auto axis = ReadAxis(ctx, name, cls, config, input_rank, false);
    if (!axis.ok()) return axis.status();
    return engine::SoftmaxSpec{*axis};
  }
  if (IsIdentityClass(cls)) {
    if (auto s = no_weights(); !s.ok()) return s;
    return engine::IdentitySpec{};
  }
  if (cls == "BatchNormalization") {
    return ConvertBatchNorm(ctx, name, cls, config, std::move(arrays), input_rank);
  }
  if (cls == "LayerNormalization") {
    return ConvertLayerNorm(ctx, name, cls, config, std::move(arrays), input_rank);
  }
  if (cls == "Conv1D" || cls == "Convolution1D") {
    return ConvertConv1D(ctx, name, cls, config, std::move(arrays));
  }
  if (cls == "MaxPooling1D" || cls == "AveragePooling1D" || cls == "MaxPool1D" ||
      cls == "AvgPool1D") {
    if (auto s = no_weights(); !s.ok()) return s;
    return ConvertPool1D(ctx, name, cls, config);
  }
  if (cls == "GlobalMaxPooling1D" || cls == "GlobalAveragePooling1D" || cls == "GlobalMaxPool1D" ||
      cls == "GlobalAvgPool1D") {
    if (auto s = no_weights(); !s.ok()) return s;
    if (auto s = ExpectChannelsLast(ctx, name, cls, config); !s.ok()) return s;
    if (Get<bool>(config, "keepdims", false)) {
      return LayerError(ctx, name, cls, "keepdims=True is not supported");
    }
    engine::GlobalPool1DSpec spec;
    spec.kind = cls.find("Max") != std::string::npos ? engine::GlobalPool1DSpec::Kind::kMax
                                                     : engine::GlobalPool1DSpec::Kind::kAverage;
    return spec;
  }
  if (cls == "Flatten") {
    if (auto s = no_weights(); !s.ok()) return s;
    if (auto s = ExpectChannelsLast(ctx, name, cls, config); !s.ok()) return s;
    return engine::FlattenSpec{};
  }
  if (cls == "Reshape") {
    if (auto s = no_weights(); !s.ok()) return s;
    const Json* target = Find(config, "target_shape");
    engine::ReshapeSpec spec;
    int unknown = 0;
    if (target && target->is_array()) {
      for (const Json& d : *target) {
        const int64_t v = d.is_number_integer() ? d.get<int64_t>() : 0;
        if (v == -1) ++unknown;
        if (v == 0 || v < -1) break;
        spec.target.push_back(v);
      }
    }
    if (!target || !target->is_array() || spec.target.size() != target->size() || unknown > 1) {
      return LayerError(ctx, name, cls,
                        "target_shape must list positive sizes with at most one -1");
    }
    return spec;
  }
  if (cls == "RepeatVector") {
    if (auto s = no_weights(); !s.ok()) return s;
    const int n = Get<int>(config, "n", 0);
    if (n <= 0) return LayerError(ctx, name, cls, "'n' must be a positive integer");
    return engine::RepeatVectorSpec{n};
  }
  if (IsMergeClass(cls)) {
    if (auto s = no_weights(); !s.ok()) return s;
    return ConvertMerge(ctx, name, cls, config, input_rank);
  }
  return absl::UnimplementedError(absl::StrCat(
      ctx.file, ": layer '", name, "' has class '", cls,
      "', which rnnserve does not support as a Keras file; for a custom layer, convert the "
      "model with tf2onnx and serve the .onnx file: see docs/import-keras.md"));
}

}  // namespace rnnserve::models::keras
