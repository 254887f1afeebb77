#include "engine/cpu/cpu_engine.h"

#include "engine/cpu/panel_gemm.h"

#include <Eigen/Core>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <atomic>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_pool.h"
#include "engine/cpu/flush_denormals.h"
#include "engine/cpu/host_layer.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/norm_layers.h"
#include "engine/cpu/quant_gemm.h"
#include "engine/cpu/recurrent.h"
#include "engine/cpu/stop_check.h"
#include "engine/lengths.h"
#include "engine/lengths_rewrite.h"
#include "engine/plan/layer_plans.h"

namespace rnnserve::engine::cpu {
namespace {

class CpuCompiledModel final : public CompiledModel {
 public:
  CpuCompiledModel(LengthsRewrite rewrite, std::vector<std::unique_ptr<RecurrentKernel>> kernels,
                   int threads)
      : model_(std::move(rewrite.model)),
        lengths_honored_(std::move(rewrite.honored)),
        sequence_inputs_(std::move(rewrite.sequence_inputs)),
        time_major_(rewrite.time_major),
        kernels_(std::move(kernels)),
        threads_(threads) {}

  absl::Status Run(const Batch& batch, std::vector<Tensor>* outputs) override;
  std::string engine_name() const override { return "cpu"; }
  std::vector<LayerPlacement> placements() const override;
  int64_t memory_bytes() const override;
  RunCounters counters() const override {
    return {.recurrent_steps_in_last_run = steps_in_last_run_.load(std::memory_order_relaxed)};
  }

 private:
  absl::Status RunLayers(const Batch& batch, std::vector<Value>* values, StopCheck* stop);
  absl::Status RunLayer(size_t index, const Batch& batch, std::vector<Value>* values,
                        StopCheck* stop);
  absl::Status RunRecurrent(size_t index, const RecurrentSpec& rnn, const Batch& batch,
                            std::vector<Value>* values, StopCheck* stop);

  const Model model_;  // with the lengths ops put in (engine/lengths_rewrite.h)
  // OK, or why a batch with lengths is refused; which inputs the lengths describe.
  const absl::Status lengths_honored_;
  const std::vector<bool> sequence_inputs_;
  const bool time_major_;
  // One kernel per layer; null for layers without one.
  const std::vector<std::unique_ptr<RecurrentKernel>> kernels_;
  // Threads of Eigen's GEMMs in Run. Set on the running thread (OpenMP's per-thread
  // nthreads-var, which Eigen reads while its own global is unset), never process-wide: models
  // with different cpu_threads run side by side.
  const int threads_;
  // RunCounters::recurrent_steps_in_last_run; written by Run, read by any thread.
  std::atomic<int64_t> steps_in_last_run_{0};
};

absl::Status CpuCompiledModel::Run(const Batch& batch, std::vector<Tensor>* outputs) {
  const ScopedFlushDenormals flush;  // as TensorFlow computes; no subnormal slow path
#ifdef _OPENMP
  omp_set_num_threads(threads_);
#endif
  if (batch.inputs.size() != model_.inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", model_.inputs.size(), " inputs, got ", batch.inputs.size()));
  }
  if (!batch.lengths.empty() && !lengths_honored_.ok()) return lengths_honored_;
  std::vector<Value> values(model_.num_values);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    values[i].tensor = batch.inputs[i];
    if (!batch.lengths.empty() && sequence_inputs_[i]) {
      const Tensor& t = values[i].tensor;
      if (auto st =
              CheckLengths(batch.lengths, t.dim(time_major_ ? 1 : 0), t.dim(time_major_ ? 0 : 1),
                           absl::StrCat("input '", model_.inputs[i].name, "': lengths"));
          !st.ok()) {
        return st;
      }
      values[i].lengths = batch.lengths;
    }
  }
  for (const auto& [layer, states] : batch.initial_states) {
    bool found = false;
    for (const Layer& l : model_.layers) {
      found |= l.name == layer && std::holds_alternative<RecurrentSpec>(l.spec);
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial states given for '", layer, "', which is no recurrent layer"));
    }
  }
  if (batch.final_states) batch.final_states->clear();
  StopCheck stop(&batch.stop);
  const absl::Status s = RunLayers(batch, &values, &stop);
  steps_in_last_run_.store(stop.total_steps(), std::memory_order_relaxed);
  if (!s.ok()) return s;
  outputs->clear();
  for (int v : model_.output_values) outputs->push_back(std::move(values[v].tensor));
  return absl::OkStatus();
}

absl::Status CpuCompiledModel::RunLayers(const Batch& batch, std::vector<Value>* values,
                                         StopCheck* stop) {
  for (size_t l = 0; l < model_.layers.size(); ++l) {
    if (stop->Now()) {
      return absl::CancelledError(absl::StrCat("the run was stopped (Batch::stop) before layer '",
                                               model_.layers[l].name, "'"));
    }
    if (auto s = RunLayer(l, batch, values, stop); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CpuCompiledModel::RunRecurrent(size_t index, const RecurrentSpec& rnn,
                                            const Batch& batch, std::vector<Value>* values,
                                            StopCheck* stop) {
  const Layer& layer = model_.layers[index];
  const Value& in = (*values)[layer.inputs[0]];
  const Tensor& x = in.tensor;
  if (x.rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' expects [B,T,",
                                                   rnn.input_size, "], got ",
                                                   ShapeString(x.shape())));
  }
  std::vector<int32_t> lengths = in.lengths;
  if (lengths.empty()) lengths.assign(x.dim(0), static_cast<int32_t>(x.dim(1)));
  // States wired in the graph come first; otherwise the request's, by layer name.
  std::vector<Tensor> initial;
  for (size_t i = 1; i < layer.inputs.size(); ++i) {
    initial.push_back((*values)[layer.inputs[i]].tensor);
  }
  if (initial.empty()) {
    if (auto it = batch.initial_states.find(layer.name); it != batch.initial_states.end()) {
      initial = it->second;
    }
  }
  std::vector<Tensor> results, finals;
  if (auto s = kernels_[index]->Run(x, lengths, in.step_mask, initial, &results,
                                    batch.final_states ? &finals : nullptr, batch.continues, stop);
      !s.ok()) {
    return s;
  }
  if (batch.final_states) (*batch.final_states)[layer.name] = std::move(finals);
  for (size_t i = 0; i < layer.outputs.size() && i < results.size(); ++i) {
    Value& v = (*values)[layer.outputs[i]];
    v.tensor = std::move(results[i]);
    // The mask travels on with a returned sequence (Keras propagates it).
    if (rnn.return_sequences && static_cast<int>(i) < kernels_[index]->num_sequence_outputs()) {
      KeepMask(in, &v);
      v.lengths = lengths;
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompiledModel::RunLayer(size_t index, const Batch& batch,
                                        std::vector<Value>* values, StopCheck* stop) {
  const Layer& layer = model_.layers[index];
  if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
    return RunRecurrent(index, *rnn, batch, values, stop);
  }
  return RunHostLayer(layer, values);
}

std::vector<LayerPlacement> CpuCompiledModel::placements() const {
  std::vector<LayerPlacement> out;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    std::string reason = "CPU engine (Eigen)";
    // A recurrent layer's weights may be stored in reduced precision (quant_gemm.h).
    // and its steps run on the row split or the unit split (recurrent.h).
    if (kernels_[i]) {
      absl::StrAppend(&reason, "; weights ", CpuWeightsPath(kernels_[i]->weights()), "; ",
                      kernels_[i]->split_description());
    }
    out.push_back({model_.layers[i].name, "cpu", std::move(reason)});
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

// Below this many multiply-adds per step, a recurrent layer runs on one thread.
constexpr int64_t kMinParallelMacs = 16384;

// Checks what the CPU kernels need of a layer, so a bad file fails at load.
absl::Status ValidateLayer(const Layer& layer) {
  return std::visit(
      [&](const auto& spec) -> absl::Status {
        using S = std::decay_t<decltype(spec)>;
        if constexpr (std::is_same_v<S, BatchNormSpec>) {
          return plan::ValidateBatchNorm(spec, layer.name);
        } else if constexpr (std::is_same_v<S, LayerNormSpec>) {
          return plan::ValidateLayerNorm(spec, layer.name);
        } else if constexpr (std::is_same_v<S, Conv1DSpec>) {
          return plan::ValidateConv1D(spec, layer.name);
        } else if constexpr (std::is_same_v<S, Pool1DSpec>) {
          return plan::ValidatePool1D(spec, layer.name);
        } else if constexpr (std::is_same_v<S, RepeatVectorSpec>) {
          if (spec.n > 0) return absl::OkStatus();
          return absl::InvalidArgumentError(absl::StrCat(
              "layer '", layer.name, "': RepeatVector n must be positive; was ", spec.n));
        } else if constexpr (std::is_same_v<S, MergeSpec>) {
          if (layer.inputs.size() >= 2) return absl::OkStatus();
          return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name,
                                                         "': a merge needs at least 2 inputs, got ",
                                                         layer.inputs.size()));
        } else {
          return absl::OkStatus();
        }
      },
      layer.spec);
}

class CpuEngine final : public Engine {
 public:
  absl::StatusOr<std::unique_ptr<CompiledModel>> Compile(
      const Model& original, const CompileOptions& options) const override {
    if (auto s = original.Validate(); !s.ok()) return s;
    LengthsRewrite rewrite = RewriteForLengths(original);
    const Model& model = rewrite.model;
    if (auto s = model.Validate(); !s.ok()) return s;
    if (options.math_mode != MathMode::kFp32) {
      return absl::InvalidArgumentError("the CPU engine computes in FP32 only");
    }
    // A kernel set forced (EngineOptions::cpu_kernels) that this CPU cannot run.
    if (auto set = ActiveCpuKernelSet(); !set.ok()) return set.status();
    const int threads = options.num_threads > 0
                            ? options.num_threads
                            : static_cast<int>(std::thread::hardware_concurrency());
    std::vector<std::unique_ptr<RecurrentKernel>> kernels(model.layers.size());
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const Layer& layer = model.layers[i];
      if (const auto* u = std::get_if<UnsupportedSpec>(&layer.spec)) {
        return absl::UnimplementedError(absl::StrCat("layer '", layer.name, "' (class ",
                                                     layer.source_class,
                                                     ") is not supported: ", u->reason));
      }
      if (auto st = ValidateLayer(layer); !st.ok()) return st;
      if (layer.inputs.empty() || layer.outputs.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer.name, "' has no inputs or outputs"));
      }
      if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
        // Tiny cells are not worth a barrier per step: they run on one thread.
        const int64_t macs_per_step = int64_t{rnn->gates()} * rnn->hidden_size *
                                      rnn->output_size() * std::max(1, options.max_batch_size);
        RecurrentOptions ro{
            .num_threads = macs_per_step >= kMinParallelMacs ? threads : 1,
            .max_batch_size = options.max_batch_size > 0 ? options.max_batch_size : 64,
            .weights = options.cpu_weights};
        auto kernel = RecurrentKernel::Create(*rnn, layer.name, ro);
        if (!kernel.ok()) return kernel.status();
        if (static_cast<int>(layer.outputs.size()) > (*kernel)->num_outputs()) {
          return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' declares ",
                                                         layer.outputs.size(), " outputs; it has ",
                                                         (*kernel)->num_outputs()));
        }
        kernels[i] = std::move(*kernel);
      }
    }
    return std::unique_ptr<CompiledModel>(
        new CpuCompiledModel(std::move(rewrite), std::move(kernels), threads));
  }
  std::string name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<Engine> CreateCpuEngine() { return std::make_unique<CpuEngine>(); }

}  // namespace rnnserve::engine::cpu
