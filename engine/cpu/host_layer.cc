#include "engine/cpu/host_layer.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_pool.h"
#include "engine/cpu/norm_layers.h"
#include "engine/cpu/shape_layers.h"
#include "engine/cpu/tensor_ops.h"

namespace rnnserve::engine::cpu {

absl::Status RunHostLayer(const Layer& layer, std::vector<Value>* values) {
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec)) {
    return RunTensorOp(*op, layer, values);
  }
  if (layer.inputs.empty() || layer.outputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' has no inputs or outputs"));
  }
  const Value& in = (*values)[layer.inputs.at(0)];
  Value& out = (*values)[layer.outputs.at(0)];
  const std::string& name = layer.name;
  return std::visit(
      [&](const auto& spec) -> absl::Status {
        using S = std::decay_t<decltype(spec)>;
        if constexpr (std::is_same_v<S, DenseSpec>) {
          return RunDense(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, MaskingSpec>) {
          return RunMasking(spec, in, &out);
        } else if constexpr (std::is_same_v<S, EmbeddingSpec>) {
          return RunEmbedding(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, ActivationSpec>) {
          return RunActivation(spec.activation, in, &out);
        } else if constexpr (std::is_same_v<S, IdentitySpec>) {
          out = in;
          return absl::OkStatus();
        } else if constexpr (std::is_same_v<S, SoftmaxSpec>) {
          return RunSoftmax(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, BatchNormSpec>) {
          return RunBatchNorm(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, LayerNormSpec>) {
          return RunLayerNorm(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, Conv1DSpec>) {
          return RunConv1D(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, Pool1DSpec>) {
          return RunPool1D(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, GlobalPool1DSpec>) {
          return RunGlobalPool1D(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, FlattenSpec>) {
          return RunFlatten(name, in, &out);
        } else if constexpr (std::is_same_v<S, ReshapeSpec>) {
          return RunReshape(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, RepeatVectorSpec>) {
          return RunRepeatVector(spec, name, in, &out);
        } else if constexpr (std::is_same_v<S, MergeSpec>) {
          std::vector<const Value*> ins;
          for (int v : layer.inputs) ins.push_back(&(*values)[v]);
          Value merged;
          if (auto s = RunMerge(spec, name, ins, &merged); !s.ok()) return s;
          out = std::move(merged);
          return absl::OkStatus();
        } else {
          return absl::InternalError(absl::StrCat("layer '", name, "' has no CPU kernel"));
        }
      },
      layer.spec);
}

}  // namespace rnnserve::engine::cpu
