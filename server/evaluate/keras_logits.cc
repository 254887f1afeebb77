#include "server/evaluate/keras_logits.h"

#include <cstdlib>
#include <string>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace rnnserve::server::evaluate {
namespace {

using engine::ActivationKind;

bool CachesLogits(const engine::Activation& a) {
  return a.kind == ActivationKind::kSoftmax || a.kind == ActivationKind::kSigmoid;
}

// The index of the layer that writes value `v`, or -1 (a model input).
int Producer(const engine::Model& model, int v) {
  for (size_t i = 0; i < model.layers.size(); ++i) {
    for (int out : model.layers[i].outputs) {
      if (out == v) return static_cast<int>(i);
    }
  }
  return -1;
}

// The activation fused into a Dense or Conv1D layer; null for other layers.
const engine::Activation* FusedActivation(const engine::Layer& layer) {
  if (layer.source_class == "TimeDistributed") return nullptr;
  if (const auto* d = std::get_if<engine::DenseSpec>(&layer.spec)) return &d->activation;
  if (const auto* c = std::get_if<engine::Conv1DSpec>(&layer.spec)) return &c->activation;
  return nullptr;
}

engine::Activation* MutableFusedActivation(engine::Layer& layer) {
  if (auto* d = std::get_if<engine::DenseSpec>(&layer.spec)) return &d->activation;
  if (auto* c = std::get_if<engine::Conv1DSpec>(&layer.spec)) return &c->activation;
  return nullptr;
}

}  // namespace

int KerasMajor(const engine::Model& model) {
  // A SavedModel imports only from its Keras metadata (tf_keras 2.x): a Keras model too.
  if (model.source_format != "keras_h5" && model.source_format != "keras" &&
      model.source_format != "tf_savedmodel") {
    return 0;
  }
  constexpr absl::string_view kPrefix = "keras ";
  if (absl::StartsWith(model.producer, kPrefix)) {
    const int major = std::atoi(model.producer.c_str() + kPrefix.size());
    if (major > 0) return major;
  }
  // A .keras file is Keras 3's format; an .h5 that does not say is taken as Keras 2's.
  return model.source_format == "keras" ? 3 : 2;
}

std::optional<OutputLogits> FindOutputLogits(const engine::Model& model, int output) {
  const int keras = KerasMajor(model);
  if (keras == 0 || output < 0 || output >= static_cast<int>(model.output_values.size())) {
    return std::nullopt;
  }
  int layer = Producer(model, model.output_values[output]);
  while (layer >= 0) {
    const engine::Layer& l = model.layers[layer];
    if (l.inputs.size() != 1) return std::nullopt;
    if (const engine::Activation* fused = FusedActivation(l)) {
      if (CachesLogits(*fused)) return OutputLogits{.layer = layer, .split = true};
      return std::nullopt;
    }
    if (l.source_class == "TimeDistributed") return std::nullopt;
    if (const auto* a = std::get_if<engine::ActivationSpec>(&l.spec)) {
      if (CachesLogits(a->activation)) return OutputLogits{.layer = layer, .split = false};
      return std::nullopt;
    }
    if (std::holds_alternative<engine::SoftmaxSpec>(l.spec)) {
      return OutputLogits{.layer = layer, .split = false};
    }
    // Keras 3's Dropout, GaussianNoise... return their input tensor itself at inference.
    if (keras >= 3 && std::holds_alternative<engine::IdentitySpec>(l.spec)) {
      layer = Producer(model, l.inputs[0]);
      continue;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

engine::Model WithLogitsOutput(const engine::Model& model, int output, const OutputLogits& logits) {
  engine::Model out = model;
  engine::ValueInfo info = model.outputs[output];
  info.name += ":logits";
  const engine::Layer& source = model.layers[logits.layer];
  int value = source.inputs[0];
  if (logits.split) {
    // [..., C] logits = the layer without its activation; the activation, a layer of its own,
    // turns them into the value the layer wrote before.
    value = out.num_values++;
    engine::Layer linear = source;
    engine::Activation* fused = MutableFusedActivation(linear);
    engine::Layer activation{.name = source.name + ":activation",
                             .source_class = "Activation",
                             .spec = engine::ActivationSpec{*fused},
                             .inputs = {value},
                             .outputs = source.outputs};
    *fused = engine::Activation::Of(ActivationKind::kLinear);
    linear.outputs = {value};
    out.layers[logits.layer] = std::move(linear);
    out.layers.insert(out.layers.begin() + logits.layer + 1, std::move(activation));
  }
  out.output_values.push_back(value);
  out.outputs.push_back(std::move(info));
  return out;
}

}  // namespace rnnserve::server::evaluate
