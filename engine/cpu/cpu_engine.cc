#include "engine/cpu/cpu_engine.h"

#include <Eigen/Core>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/recurrent.h"
#include "engine/cpu/tensor_ops.h"

namespace rnnserve::engine::cpu {
namespace {

class CpuCompiledModel final : public CompiledModel {
 public:
  CpuCompiledModel(const Model& model, std::vector<std::unique_ptr<RecurrentKernel>> kernels)
      : model_(model), kernels_(std::move(kernels)) {}

  absl::Status Run(const Batch& batch, std::vector<Tensor>* outputs) override;
  std::string engine_name() const override { return "cpu"; }
  std::vector<LayerPlacement> placements() const override;
  int64_t memory_bytes() const override;

 private:
  absl::Status RunLayer(size_t index, std::vector<Value>* values);

  const Model model_;
  // One kernel per layer; null for layers without one.
  const std::vector<std::unique_ptr<RecurrentKernel>> kernels_;
};

absl::Status CpuCompiledModel::Run(const Batch& batch, std::vector<Tensor>* outputs) {
  if (batch.inputs.size() != model_.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", model_.inputs.size(),
                                                   " inputs, got ", batch.inputs.size()));
  }
  std::vector<Value> values(model_.num_values);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    values[i].tensor = batch.inputs[i];
    if (!batch.lengths.empty() && values[i].tensor.rank() >= 2) {
      if (static_cast<int64_t>(batch.lengths.size()) != values[i].tensor.dim(0)) {
        return absl::InvalidArgumentError(absl::StrCat(batch.lengths.size(),
                                                       " lengths for a batch of ",
                                                       values[i].tensor.dim(0)));
      }
      values[i].lengths = batch.lengths;
    }
  }
  for (size_t l = 0; l < model_.layers.size(); ++l) {
    if (auto s = RunLayer(l, &values); !s.ok()) return s;
  }
  outputs->clear();
  for (int v : model_.output_values) outputs->push_back(std::move(values[v].tensor));
  return absl::OkStatus();
}

absl::Status CpuCompiledModel::RunLayer(size_t index, std::vector<Value>* values) {
  const Layer& layer = model_.layers[index];
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec)) {
    return RunTensorOp(*op, layer, values);
  }
  const Value& in = (*values)[layer.inputs.at(0)];
  Value& out = (*values)[layer.outputs.at(0)];
  if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
    const Tensor& x = in.tensor;
    if (x.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' expects [B,T,F], got ",
                                                     ShapeString(x.shape())));
    }
    std::vector<int32_t> lengths = in.lengths;
    if (lengths.empty()) lengths.assign(x.dim(0), static_cast<int32_t>(x.dim(1)));
    std::vector<Tensor> initial;
    for (size_t i = 1; i < layer.inputs.size(); ++i) {
      initial.push_back((*values)[layer.inputs[i]].tensor);
    }
    std::vector<Tensor> results;
    if (auto s = kernels_[index]->Run(x, lengths, initial, &results); !s.ok()) return s;
    for (size_t i = 0; i < layer.outputs.size() && i < results.size(); ++i) {
      Value& v = (*values)[layer.outputs[i]];
      v.tensor = std::move(results[i]);
      // The mask travels on with a returned sequence (Keras propagates it).
      if (i == 0 && rnn->return_sequences) v.lengths = lengths;
    }
    return absl::OkStatus();
  }
  if (const auto* dense = std::get_if<DenseSpec>(&layer.spec)) {
    return RunDense(*dense, layer.name, in, &out);
  }
  if (const auto* masking = std::get_if<MaskingSpec>(&layer.spec)) {
    return RunMasking(*masking, in, &out);
  }
  if (const auto* embedding = std::get_if<EmbeddingSpec>(&layer.spec)) {
    return RunEmbedding(*embedding, layer.name, in, &out);
  }
  if (const auto* act = std::get_if<ActivationSpec>(&layer.spec)) {
    return RunActivation(act->activation, in, &out);
  }
  if (std::holds_alternative<IdentitySpec>(layer.spec)) {
    out = in;
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("layer '", layer.name, "' has no CPU kernel"));
}

std::vector<LayerPlacement> CpuCompiledModel::placements() const {
  std::vector<LayerPlacement> out;
  for (const Layer& layer : model_.layers) {
    out.push_back({layer.name, "cpu", "CPU engine (Eigen)"});
  }
  return out;
}

int64_t CpuCompiledModel::memory_bytes() const {
  int64_t bytes = 0;
  for (const auto& k : kernels_) {
    if (k) bytes += k->memory_bytes();
  }
  for (const Layer& layer : model_.layers) {
    if (const auto* d = std::get_if<DenseSpec>(&layer.spec)) {
      bytes += sizeof(float) * (d->kernel.size() + d->bias.size());
    }
    if (const auto* e = std::get_if<EmbeddingSpec>(&layer.spec)) {
      bytes += sizeof(float) * e->table.size();
    }
  }
  return bytes;
}

class CpuEngine final : public Engine {
 public:
  absl::StatusOr<std::unique_ptr<CompiledModel>> Compile(
      const Model& model, const CompileOptions& options) const override {
    if (auto s = model.Validate(); !s.ok()) return s;
    if (options.math_mode != MathMode::kFp32) {
      return absl::InvalidArgumentError("the CPU engine computes in FP32 only");
    }
    const int threads = options.num_threads > 0
                            ? options.num_threads
                            : static_cast<int>(std::thread::hardware_concurrency());
    Eigen::setNbThreads(threads);
    std::vector<std::unique_ptr<RecurrentKernel>> kernels(model.layers.size());
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const Layer& layer = model.layers[i];
      if (const auto* u = std::get_if<UnsupportedSpec>(&layer.spec)) {
        return absl::UnimplementedError(absl::StrCat("layer '", layer.name, "' (class ",
                                                     layer.source_class,
                                                     ") is not supported: ", u->reason));
      }
      const bool has_kernel =
          std::holds_alternative<RecurrentSpec>(layer.spec) ||
          std::holds_alternative<DenseSpec>(layer.spec) ||
          std::holds_alternative<MaskingSpec>(layer.spec) ||
          std::holds_alternative<EmbeddingSpec>(layer.spec) ||
          std::holds_alternative<ActivationSpec>(layer.spec) ||
          std::holds_alternative<IdentitySpec>(layer.spec) ||
          std::holds_alternative<TensorOpSpec>(layer.spec);
      if (!has_kernel) {
        return absl::UnimplementedError(absl::StrCat("layer '", layer.name, "' (class ",
                                                     layer.source_class,
                                                     ") has no CPU kernel"));
      }
      if (layer.inputs.empty() || layer.outputs.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer.name, "' has no inputs or outputs"));
      }
      if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
        auto kernel = RecurrentKernel::Create(*rnn, layer.name);
        if (!kernel.ok()) return kernel.status();
        if (static_cast<int>(layer.outputs.size()) > (*kernel)->num_outputs()) {
          return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' declares ",
                                                         layer.outputs.size(),
                                                         " outputs; it has ",
                                                         (*kernel)->num_outputs()));
        }
        kernels[i] = std::move(*kernel);
      }
    }
    return std::unique_ptr<CompiledModel>(new CpuCompiledModel(model, std::move(kernels)));
  }
  std::string name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<Engine> CreateCpuEngine() { return std::make_unique<CpuEngine>(); }

}  // namespace rnnserve::engine::cpu
