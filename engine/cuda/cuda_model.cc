#include "engine/cuda/cuda_model.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/host_layer.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/recurrent.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/dev_value.h"
#include "engine/cuda/device_layers.h"
#include "engine/cuda/fused_recurrent.h"
#include "engine/cuda/kernels.h"
#include "engine/lengths.h"

namespace rnnserve::engine::cuda {
namespace {

const char* MathName(MathMode m) {
  switch (m) {
    case MathMode::kFp32:
      return "FP32 (FMA math)";
    case MathMode::kTf32:
      return "TF32";
    case MathMode::kFp16:
      return "FP16 (FP32 accumulation)";
    case MathMode::kBf16:
      return "BF16 (FP32 accumulation)";
  }
  return "?";
}

const char* CellName(CellType c) {
  return c == CellType::kLstm ? "LSTM" : c == CellType::kGru ? "GRU" : "simple RNN";
}

enum class Where { kGpu, kCpu };

struct LayerPlan {
  Where where = Where::kGpu;
  std::string reason;
  std::unique_ptr<CudnnRecurrent> rnn;  // cuDNN placement
  // The layers cuDNN cannot run; beside cuDNN, the batches it cannot run (a sequence of length
  // 0, masked steps inside a sequence). Null when the layer does not fit the kernel.
  std::unique_ptr<FusedRecurrent> fused;
  std::unique_ptr<cpu::RecurrentKernel> cpu_rnn;  // CPU placement and stateful batches
  DeviceBuffer kernel, bias;                      // Dense [in, out], [out]; Embedding table
  DeviceBuffer hy, cy, y, h0, c0;                 // recurrent scratch
  bool device_layer = false;                      // run by RunDeviceLayer (device_layers.h)
  DeviceLayerState device;
};

class CudaCompiledModel final : public CompiledModel {
 public:
  CudaCompiledModel(const Model& model, const CompileOptions& options, int device)
      : model_(model), options_(options), device_(device) {}
  ~CudaCompiledModel() override;

  absl::Status Init();
  absl::Status Run(const Batch& batch, std::vector<Tensor>* outputs) override;
  std::string engine_name() const override { return "cuda"; }
  std::vector<LayerPlacement> placements() const override;
  int64_t memory_bytes() const override;
  int64_t host_copies_in_last_run() const { return host_copies_in_last_run_; }

 private:
  absl::Status PlanLayer(const Layer& layer, LayerPlan* plan);
  absl::Status Upload(const float* src, int64_t n, DeviceBuffer* dst);
  absl::Status ToDevice(DevValue* v) { return cuda::ToDevice(v, stream_); }
  absl::Status ToHost(DevValue* v) {
    if (!v->host_valid) ++host_copies_;
    return cuda::ToHost(v, stream_);
  }
  absl::Status RunLayer(size_t index, const Batch& batch);
  // On cuDNN (use_cudnn) or on the fused kernel.
  // Initial states from the layer's state inputs or batch.initial_states; final states into
  // batch.final_states when set.
  absl::Status RunRecurrentGpu(const Layer& layer, const RecurrentSpec& spec, LayerPlan& plan,
                               bool use_cudnn, const Batch& batch);
  absl::Status RunRecurrentCpu(const Layer& layer, LayerPlan& plan, const Batch& batch);
  absl::Status RunDense(const Layer& layer, const DenseSpec& spec, LayerPlan& plan);
  absl::Status RunEmbedding(const Layer& layer, const EmbeddingSpec& spec, LayerPlan& plan);
  absl::Status RunCpuLayer(const Layer& layer);

  const Model model_;
  const CompileOptions options_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<LayerPlan> plans_;  // one per layer
  std::vector<DevValue> values_;  // one per model value; reused across batches
  DeviceBuffer lengths_dev_;      // [B] int32, the lengths of the recurrent layer running
  DeviceBuffer step_mask_dev_;    // [B, T] uint8, its step mask when it has one
  // Slots for the layers run on the host (RunCpuLayer); empty between layers.
  std::vector<cpu::Value> host_values_;
  int64_t host_copies_ = 0;  // device-to-host copies of the running batch
  int64_t host_copies_in_last_run_ = 0;
};

CudaCompiledModel::~CudaCompiledModel() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  plans_.clear();
  values_.clear();
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (stream_) cudaStreamDestroy(stream_);
}

absl::Status CudaCompiledModel::Upload(const float* src, int64_t n, DeviceBuffer* dst) {
  RNNSERVE_RETURN_IF_ERROR(dst->Reserve(std::max<int64_t>(n, 1) * sizeof(float)));
  return CudaOk(
      cudaMemcpyAsync(dst->get(), src, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
      "cudaMemcpyAsync (weights)");
}

absl::Status CudaCompiledModel::Init() {
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(device_), "cudaSetDevice"));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnCreate(&cudnn_), "cudnnCreate"));
  RNNSERVE_RETURN_IF_ERROR(CudnnOk(cudnnSetStream(cudnn_, stream_), "cudnnSetStream"));
  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasCreate(&cublas_), "cublasCreate"));
  RNNSERVE_RETURN_IF_ERROR(CublasOk(cublasSetStream(cublas_, stream_), "cublasSetStream"));
  RNNSERVE_RETURN_IF_ERROR(CublasOk(
      cublasSetMathMode(cublas_, options_.math_mode == MathMode::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                       : CUBLAS_PEDANTIC_MATH),
      "cublasSetMathMode"));
  plans_.resize(model_.layers.size());
  values_.resize(model_.num_values);
  host_values_.resize(model_.num_values);
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    RNNSERVE_RETURN_IF_ERROR(PlanLayer(model_.layers[i], &plans_[i]));
  }
  return CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (compile)");
}

absl::Status CudaCompiledModel::PlanLayer(const Layer& layer, LayerPlan* plan) {
  if (const auto* u = std::get_if<UnsupportedSpec>(&layer.spec)) {
    return absl::UnimplementedError(absl::StrCat(
        "layer '", layer.name, "' (class ", layer.source_class, ") is not supported: ", u->reason));
  }
  if (!std::holds_alternative<TensorOpSpec>(layer.spec) &&
      (layer.inputs.empty() || layer.outputs.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' has no inputs or outputs"));
  }
  if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
    // The CPU kernel validates the layer and is the fallback for lengths of 0.
    auto cpu_kernel = cpu::RecurrentKernel::Create(*rnn, layer.name);
    if (!cpu_kernel.ok()) return cpu_kernel.status();
    if (static_cast<int>(layer.outputs.size()) > (*cpu_kernel)->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' declares ",
                                                     layer.outputs.size(), " outputs; it has ",
                                                     (*cpu_kernel)->num_outputs()));
    }
    plan->cpu_rnn = std::move(*cpu_kernel);
    auto fused = FusedRecurrent::Create(*rnn, stream_);
    if (!fused.ok() && fused.status().code() != absl::StatusCode::kUnimplemented) {
      return fused.status();
    }
    if (fused.ok()) plan->fused = std::move(*fused);
    const absl::Status cudnn_why = CudnnSupports(*rnn);
    if (!cudnn_why.ok()) {
      if (!plan->fused) {
        plan->where = Where::kCpu;
        plan->reason =
            absl::StrCat("CPU engine: cuDNN cannot run it: ", cudnn_why.message(),
                         "; the fused CUDA kernel cannot either: ", fused.status().message());
        return absl::OkStatus();
      }
      plan->reason = absl::StrCat("fused CUDA recurrent kernel, exact FP32",
                                  options_.math_mode == MathMode::kFp32
                                      ? ""
                                      : absl::StrCat(" (it computes FP32 only; the model asks ",
                                                     MathName(options_.math_mode), ")"),
                                  ": cuDNN cannot run it: ", cudnn_why.message());
      return absl::OkStatus();
    }
    auto k = CudnnRecurrent::Create(*rnn, layer.name, options_.math_mode, cudnn_, stream_);
    if (!k.ok()) return k.status();
    plan->rnn = std::move(*k);
    plan->reason = absl::StrCat(
        "cuDNN ", CellName(rnn->cell), rnn->directions.size() == 2 ? ", bidirectional" : "", ", ",
        MathName(options_.math_mode), ", algorithm chosen per batch size",
        plan->fused ? "; batches with a sequence of length 0 or masked steps inside a sequence "
                      "run on the fused CUDA recurrent kernel (exact FP32)"
                    : "");
    return absl::OkStatus();
  }
  if (const auto* dense = std::get_if<DenseSpec>(&layer.spec)) {
    if (static_cast<int64_t>(dense->kernel.size()) != int64_t{dense->in} * dense->out ||
        (!dense->bias.empty() && static_cast<int>(dense->bias.size()) != dense->out)) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': kernel of ",
                                                     dense->kernel.size(), " values, expected ",
                                                     int64_t{dense->in} * dense->out));
    }
    RNNSERVE_RETURN_IF_ERROR(Upload(dense->kernel.data(), dense->kernel.size(), &plan->kernel));
    if (!dense->bias.empty()) {
      RNNSERVE_RETURN_IF_ERROR(Upload(dense->bias.data(), dense->bias.size(), &plan->bias));
    }
    plan->reason = absl::StrCat("cuBLAS SGEMM + bias/activation kernel, ",
                                options_.math_mode == MathMode::kTf32 ? "TF32" : "FP32");
    return absl::OkStatus();
  }
  if (const auto* emb = std::get_if<EmbeddingSpec>(&layer.spec)) {
    if (static_cast<int64_t>(emb->table.size()) != int64_t{emb->vocab} * emb->dim) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': table of ",
                                                     emb->table.size(), " values, expected ",
                                                     int64_t{emb->vocab} * emb->dim));
    }
    RNNSERVE_RETURN_IF_ERROR(Upload(emb->table.data(), emb->table.size(), &plan->kernel));
    plan->reason = "gather kernel (ids validated on the host)";
    return absl::OkStatus();
  }
  if (std::holds_alternative<ActivationSpec>(layer.spec)) {
    plan->reason = "activation kernel";
    return absl::OkStatus();
  }
  if (std::holds_alternative<IdentitySpec>(layer.spec)) {
    plan->reason = "identity at inference";
    return absl::OkStatus();
  }
  if (std::holds_alternative<MaskingSpec>(layer.spec)) {
    plan->where = Where::kCpu;
    plan->reason =
        "host: the lengths it derives must be on the host for cuDNN's sequence descriptors";
    return absl::OkStatus();
  }
  auto placed = PlanDeviceLayer(layer, stream_, &plan->device);
  if (!placed.ok()) return placed.status();
  plan->device_layer = placed->on_device;
  plan->where = placed->on_device ? Where::kGpu : Where::kCpu;
  plan->reason = std::move(placed->reason);
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::Run(const Batch& batch, std::vector<Tensor>* outputs) {
  if (batch.inputs.size() != model_.inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", model_.inputs.size(), " inputs, got ", batch.inputs.size()));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(device_), "cudaSetDevice"));
  for (DevValue& v : values_) {
    v.host_valid = v.dev_valid = false;
    v.input = nullptr;
    v.lengths.clear();
    v.step_mask.clear();
  }
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    DevValue& v = values_[i];
    const Tensor& t = batch.inputs[i];
    v.input = &t;
    v.host_valid = true;
    v.dtype = t.dtype();
    v.shape = t.shape();
    if (!batch.lengths.empty() && t.rank() >= 2) {
      RNNSERVE_RETURN_IF_ERROR(CheckLengths(batch.lengths, t.dim(0), t.dim(1),
                                            absl::StrCat("input '", model_.inputs[i].name,
                                                         "': lengths")));
      v.lengths = batch.lengths;
    }
  }
  host_copies_ = 0;
  for (size_t l = 0; l < model_.layers.size(); ++l) {
    RNNSERVE_RETURN_IF_ERROR(RunLayer(l, batch));
  }
  host_copies_in_last_run_ = host_copies_;
  outputs->clear();
  for (int id : model_.output_values) RNNSERVE_RETURN_IF_ERROR(ToHost(&values_[id]));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  for (size_t i = 0; i < model_.output_values.size(); ++i) {
    DevValue& v = values_[model_.output_values[i]];
    if (v.input != nullptr) {
      outputs->push_back(*v.input);  // the caller's own input is also an output
    } else if (v.host_valid) {
      outputs->push_back(std::move(v.host));
      v.host_valid = false;
    } else {  // the same value named twice: already moved out
      const auto first = std::find(model_.output_values.begin(), model_.output_values.end(),
                                   model_.output_values[i]);
      outputs->push_back((*outputs)[first - model_.output_values.begin()]);
    }
  }
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::RunLayer(size_t index, const Batch& batch) {
  const Layer& layer = model_.layers[index];
  LayerPlan& plan = plans_[index];
  if (plan.device_layer) {
    auto done = RunDeviceLayer(layer, stream_, cublas_, plan.device, values_);
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    return RunCpuLayer(layer);  // this batch's operands are INT64 shape tensors
  }
  if (plan.where == Where::kCpu && !std::holds_alternative<RecurrentSpec>(layer.spec)) {
    return RunCpuLayer(layer);
  }
  DevValue& in = values_[layer.inputs[0]];
  if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
    if (in.shape.size() != 3 || in.dtype != DType::kFloat32 || in.shape[2] != rnn->input_size) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': input ",
                                                     ShapeString(in.shape), " expected [B,T,",
                                                     rnn->input_size, "]"));
    }
    const bool empty_sequence =
        std::find(in.lengths.begin(), in.lengths.end(), 0) != in.lengths.end();
    // Sequences of length 0 and interior masked steps, which cuDNN cannot skip, run on the
    // fused kernel, or on the CPU kernel where the layer has none.
    const bool cudnn_can = plan.rnn && !empty_sequence && in.step_mask.empty();
    if (plan.where == Where::kCpu || in.shape[0] == 0 || in.shape[1] == 0 ||
        (!cudnn_can && !plan.fused)) {
      return RunRecurrentCpu(layer, plan, batch);
    }
    return RunRecurrentGpu(layer, *rnn, plan, /*use_cudnn=*/cudnn_can, batch);
  }
  if (const auto* dense = std::get_if<DenseSpec>(&layer.spec)) {
    return RunDense(layer, *dense, plan);
  }
  if (const auto* emb = std::get_if<EmbeddingSpec>(&layer.spec)) {
    return RunEmbedding(layer, *emb, plan);
  }
  DevValue& out = values_[layer.outputs[0]];
  if (const auto* act = std::get_if<ActivationSpec>(&layer.spec)) {
    if (in.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", layer.name, "' expects float input"));
    }
    RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
    RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, in.shape));
    out.lengths = in.lengths;
    out.step_mask = in.step_mask;
    RNNSERVE_RETURN_IF_ERROR(CudaOk(
        cudaMemcpyAsync(out.dev.get(), in.dev.get(), in.bytes(), cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync"));
    const int64_t cols = in.shape.empty() ? 1 : in.shape.back();
    const int64_t rows = cols > 0 ? NumElements(in.shape) / cols : 0;
    return BiasAndActivation(out.dev.as<float>(), nullptr, rows, static_cast<int>(cols),
                             act->activation, stream_);
  }
  if (std::holds_alternative<IdentitySpec>(layer.spec)) {
    out.dtype = in.dtype;
    out.shape = in.shape;
    out.lengths = in.lengths;
    out.step_mask = in.step_mask;
    out.host_valid = in.host_valid;
    out.input = in.input;
    if (in.host_valid && in.input == nullptr) out.host = in.host;
    out.dev_valid = false;
    if (in.dev_valid) {
      RNNSERVE_RETURN_IF_ERROR(out.dev.Reserve(std::max<int64_t>(in.bytes(), 1)));
      RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(out.dev.get(), in.dev.get(), in.bytes(),
                                                      cudaMemcpyDeviceToDevice, stream_),
                                      "cudaMemcpyAsync"));
      out.dev_valid = true;
    }
    return absl::OkStatus();
  }
  return RunCpuLayer(layer);
}

absl::Status CudaCompiledModel::RunCpuLayer(const Layer& layer) {
  // The layer's inputs on the host, in the CPU engine's value slots (copies: a value may be
  // read by several layers); its outputs moved back into this model's values.
  for (int id : layer.inputs) {
    DevValue& v = values_[id];
    RNNSERVE_RETURN_IF_ERROR(ToHost(&v));
    host_values_[id] = cpu::Value{v.host_tensor(), v.lengths, v.step_mask};
  }
  const absl::Status s = cpu::RunHostLayer(layer, &host_values_);
  for (int id : layer.inputs) host_values_[id] = cpu::Value{};
  if (!s.ok()) {
    for (int id : layer.outputs) host_values_[id] = cpu::Value{};
    return s;
  }
  for (int id : layer.outputs) {
    cpu::Value& hv = host_values_[id];
    DevValue& out = values_[id];
    out.input = nullptr;
    out.host = std::move(hv.tensor);
    out.lengths = std::move(hv.lengths);
    out.step_mask = std::move(hv.step_mask);
    out.dtype = out.host.dtype();
    out.shape = out.host.shape();
    out.host_valid = true;
    out.dev_valid = false;
    hv = cpu::Value{};
  }
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::RunRecurrentCpu(const Layer& layer, LayerPlan& plan,
                                                const Batch& batch) {
  DevValue& in = values_[layer.inputs[0]];
  RNNSERVE_RETURN_IF_ERROR(ToHost(&in));
  std::vector<int32_t> lengths = in.lengths;
  if (lengths.empty()) lengths.assign(in.shape[0], static_cast<int32_t>(in.shape[1]));
  std::vector<Tensor> initial;
  for (size_t i = 1; i < layer.inputs.size(); ++i) {
    RNNSERVE_RETURN_IF_ERROR(ToHost(&values_[layer.inputs[i]]));
    initial.push_back(values_[layer.inputs[i]].host_tensor());
  }
  if (initial.empty()) {
    if (auto it = batch.initial_states.find(layer.name); it != batch.initial_states.end()) {
      initial = it->second;
    }
  }
  std::vector<Tensor> results, finals;
  RNNSERVE_RETURN_IF_ERROR(plan.cpu_rnn->Run(in.host_tensor(), lengths, in.step_mask, initial,
                                             &results, batch.final_states ? &finals : nullptr));
  if (batch.final_states) (*batch.final_states)[layer.name] = std::move(finals);
  const bool seq = std::get<RecurrentSpec>(layer.spec).return_sequences;
  for (size_t i = 0; i < layer.outputs.size() && i < results.size(); ++i) {
    DevValue& v = values_[layer.outputs[i]];
    v.input = nullptr;
    v.host = std::move(results[i]);
    v.dtype = DType::kFloat32;
    v.shape = v.host.shape();
    v.host_valid = true;
    v.dev_valid = false;
    v.lengths.clear();
    v.step_mask.clear();
    if (seq && static_cast<int>(i) < plan.cpu_rnn->num_sequence_outputs()) {
      v.lengths = lengths;
      v.step_mask = in.step_mask;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::RunRecurrentGpu(const Layer& layer, const RecurrentSpec& spec,
                                                LayerPlan& plan, bool use_cudnn,
                                                const Batch& batch) {
  DevValue& in = values_[layer.inputs[0]];
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
  const int B = static_cast<int>(in.shape[0]), T = static_cast<int>(in.shape[1]);
  const int dirs = static_cast<int>(spec.directions.size()), H = spec.hidden_size,
            Hp = spec.output_size();
  const bool lstm = spec.cell == CellType::kLstm;
  std::vector<int32_t> lengths = in.lengths;
  if (lengths.empty()) lengths.assign(B, T);
  RNNSERVE_RETURN_IF_ERROR(lengths_dev_.Reserve(B * sizeof(int32_t)));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaMemcpyAsync(lengths_dev_.get(), lengths.data(), B * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_),
             "cudaMemcpyAsync (lengths)"));

  // Initial states: the layer's state inputs or, for a stateful batch, the request's states by
  // layer name; one [B, size] tensor per state (h, c per direction), which the kernels read
  // stacked: h0 [dirs, B, H'], c0 [dirs, B, H].
  const int per_dir = lstm ? 2 : 1;
  const size_t n_inputs = layer.inputs.size() - 1;
  const std::vector<Tensor>* given = nullptr;
  if (n_inputs == 0) {
    if (auto it = batch.initial_states.find(layer.name); it != batch.initial_states.end()) {
      given = &it->second;
    }
  }
  const size_t n_init = given != nullptr ? given->size() : n_inputs;
  if (n_init != 0 && n_init != static_cast<size_t>(dirs * per_dir)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", layer.name, "': expected ", dirs * per_dir, " initial states, got ", n_init));
  }
  if (n_init > 0) {
    RNNSERVE_RETURN_IF_ERROR(plan.h0.Reserve(sizeof(float) * dirs * B * Hp));
    RNNSERVE_RETURN_IF_ERROR(plan.c0.Reserve(sizeof(float) * dirs * B * H));
  }
  for (size_t i = 0; i < n_init; ++i) {
    DevValue* value = given != nullptr ? nullptr : &values_[layer.inputs[1 + i]];
    const DType dtype = value != nullptr ? value->dtype : (*given)[i].dtype();
    const Shape& shape = value != nullptr ? value->shape : (*given)[i].shape();
    const bool is_c = i % per_dir == 1;
    const int size = is_c ? H : Hp;
    if (dtype != DType::kFloat32 || shape != Shape{B, size}) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': initial state ", i,
                                                     " is ", ShapeString(shape), ", expected [", B,
                                                     ",", size, "]"));
    }
    if (value != nullptr) RNNSERVE_RETURN_IF_ERROR(ToDevice(value));
    float* dst = (is_c ? plan.c0.as<float>() : plan.h0.as<float>()) +
                 static_cast<int64_t>(i / per_dir) * B * size;
    RNNSERVE_RETURN_IF_ERROR(CudaOk(
        cudaMemcpyAsync(
            dst, value != nullptr ? value->dev.get() : (*given)[i].f32(), sizeof(float) * B * size,
            value != nullptr ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (initial state)"));
  }

  RNNSERVE_RETURN_IF_ERROR(plan.hy.Reserve(sizeof(float) * dirs * B * Hp));  // [dirs, B, H']
  RNNSERVE_RETURN_IF_ERROR(plan.cy.Reserve(sizeof(float) * dirs * B * H));   // [dirs, B, H]
  DevValue& out = values_[layer.outputs[0]];
  const bool seq = spec.return_sequences;
  // The sequence goes straight into the output value when no merge kernel follows.
  const bool direct = seq && (dirs == 1 || spec.merge == MergeMode::kConcat);
  float* y = nullptr;
  if (seq) {
    if (direct) {
      RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, T, dirs * Hp}));
      y = out.dev.as<float>();
    } else {
      RNNSERVE_RETURN_IF_ERROR(plan.y.Reserve(sizeof(float) * B * T * dirs * Hp));
      y = plan.y.as<float>();
    }
  }
  RecurrentIO io{.B = B,
                 .T = T,
                 .lengths = lengths,
                 .lengths_dev = lengths_dev_.as<int32_t>(),
                 .x = in.dev.as<float>(),
                 .h0 = n_init > 0 ? plan.h0.as<float>() : nullptr,
                 .c0 = n_init > 0 && lstm ? plan.c0.as<float>() : nullptr,
                 .y = y,
                 .hy = plan.hy.as<float>(),
                 .cy = lstm ? plan.cy.as<float>() : nullptr};
  if (use_cudnn) {
    RNNSERVE_RETURN_IF_ERROR(plan.rnn->Forward(io));
  } else {
    const uint8_t* mask = nullptr;
    if (!in.step_mask.empty()) {
      RNNSERVE_RETURN_IF_ERROR(step_mask_dev_.Reserve(in.step_mask.size()));
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemcpyAsync(step_mask_dev_.get(), in.step_mask.data(), in.step_mask.size(),
                                 cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync (step mask)"));
      mask = step_mask_dev_.as<uint8_t>();
    }
    RNNSERVE_RETURN_IF_ERROR(plan.fused->Forward(io, mask));
  }
  if (batch.final_states != nullptr) {
    // Per direction h [B, H'] then, for LSTM, c [B, H]: the state after each sequence's last
    // valid step, from hy [dirs, B, H'] and cy [dirs, B, H].
    std::vector<Tensor> finals;
    for (int d = 0; d < dirs; ++d) {
      for (int k = 0; k < per_dir; ++k) {
        const int size = k == 1 ? H : Hp;
        const float* src = (k == 1 ? plan.cy.as<float>() : plan.hy.as<float>()) +
                           static_cast<int64_t>(d) * B * size;
        Tensor t = Tensor::Float({B, size});
        RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(t.f32(), src, sizeof(float) * B * size,
                                                        cudaMemcpyDeviceToHost, stream_),
                                        "cudaMemcpyAsync (final state)"));
        finals.push_back(std::move(t));
      }
    }
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    (*batch.final_states)[layer.name] = std::move(finals);
  }

  // The main output(s): [B, T, ...] sequences or [B, ...] final outputs, merged per merge mode.
  const int64_t rows = seq ? int64_t{B} * T : B;
  const float* a = seq ? y : plan.hy.as<float>();
  const float* b = seq ? y + Hp : plan.hy.as<float>() + int64_t{B} * Hp;
  const int64_t stride = seq ? dirs * Hp : Hp;
  size_t next_output = 1;
  if (!direct) {
    Shape shape = seq ? Shape{B, T, Hp} : Shape{B, Hp};
    if (dirs == 2 && spec.merge == MergeMode::kNone) {
      DevValue& second = values_[layer.outputs.at(1)];
      RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
      RNNSERVE_RETURN_IF_ERROR(SetDevice(&second, DType::kFloat32, shape));
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemcpy2DAsync(out.dev.get(), Hp * sizeof(float), a, stride * sizeof(float),
                                   Hp * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpy2DAsync (forward half)"));
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemcpy2DAsync(second.dev.get(), Hp * sizeof(float), b, stride * sizeof(float),
                                   Hp * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpy2DAsync (backward half)"));
      next_output = 2;
    } else if (dirs == 1) {
      RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
      RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(out.dev.get(), a, rows * Hp * sizeof(float),
                                                      cudaMemcpyDeviceToDevice, stream_),
                                      "cudaMemcpyAsync (final output)"));
    } else {
      MergeOp op = MergeOp::kConcat;
      if (spec.merge == MergeMode::kSum) op = MergeOp::kSum;
      if (spec.merge == MergeMode::kMul) op = MergeOp::kMul;
      if (spec.merge == MergeMode::kAve) op = MergeOp::kAve;
      if (op == MergeOp::kConcat) shape.back() = 2 * Hp;
      RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(LaunchMerge(a, stride, b, stride, out.dev.as<float>(), rows, Hp, op, stream_),
                 "bidirectional merge kernel"));
    }
  }
  out.lengths.clear();
  out.step_mask.clear();
  if (seq) {  // the mask travels on with a returned sequence
    out.lengths = lengths;
    out.step_mask = in.step_mask;
  }
  if (spec.return_state) {
    for (int d = 0; d < dirs; ++d) {
      for (int k = 0; k < per_dir; ++k) {
        if (next_output >= layer.outputs.size()) break;
        DevValue& st = values_[layer.outputs[next_output++]];
        const int size = k == 0 ? Hp : H;
        const float* src =
            (k == 0 ? plan.hy.as<float>() : plan.cy.as<float>()) + int64_t{d} * B * size;
        RNNSERVE_RETURN_IF_ERROR(SetDevice(&st, DType::kFloat32, {B, size}));
        st.lengths.clear();
        RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(st.dev.get(), src, sizeof(float) * B * size,
                                                        cudaMemcpyDeviceToDevice, stream_),
                                        "cudaMemcpyAsync (final state)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::RunDense(const Layer& layer, const DenseSpec& spec,
                                         LayerPlan& plan) {
  DevValue& in = values_[layer.inputs[0]];
  if (in.dtype != DType::kFloat32 || in.shape.size() < 2 || in.shape.back() != spec.in) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': input ",
                                                   ShapeString(in.shape), " expected last axis ",
                                                   spec.in));
  }
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
  DevValue& out = values_[layer.outputs[0]];
  Shape shape = in.shape;
  shape.back() = spec.out;
  const int64_t rows = NumElements(in.shape) / spec.in;
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
  out.lengths = in.lengths;
  out.step_mask = in.step_mask;
  if (rows == 0) return absl::OkStatus();
  RNNSERVE_RETURN_IF_ERROR(RowMajorGemm(cublas_, in.dev.as<float>(), plan.kernel.as<float>(),
                                        out.dev.as<float>(), rows, spec.in, spec.out,
                                        "cublasSgemm (dense)"));
  return BiasAndActivation(out.dev.as<float>(), spec.bias.empty() ? nullptr : plan.bias.as<float>(),
                           rows, spec.out, spec.activation, stream_);
}

absl::Status CudaCompiledModel::RunEmbedding(const Layer& layer, const EmbeddingSpec& spec,
                                             LayerPlan& plan) {
  DevValue& in = values_[layer.inputs[0]];
  if (in.dtype != DType::kInt64 || in.shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "': expects int ids [B,T], got ", DTypeName(in.dtype),
                     " ", ShapeString(in.shape)));
  }
  RNNSERVE_RETURN_IF_ERROR(ToHost(&in));
  const int64_t B = in.shape[0], T = in.shape[1];
  const int64_t* ids = in.host_tensor().i64();
  for (int64_t i = 0; i < B * T; ++i) {
    if (ids[i] < 0 || ids[i] >= spec.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': token id ", ids[i],
                                                     " outside [0, ", spec.vocab, ")"));
    }
  }
  DevValue& out = values_[layer.outputs[0]];
  out.lengths = in.lengths;
  out.step_mask = in.step_mask;
  if (spec.mask_zero) {                    // id 0 is a masked step, as the CPU engine derives it
    std::vector<uint8_t> valid(B * T, 0);  // [B, T]
    for (int64_t b = 0; b < B; ++b) {
      const int64_t limit = in.lengths.empty() ? T : in.lengths[b];
      for (int64_t t = 0; t < limit; ++t) valid[b * T + t] = ids[b * T + t] != 0;
    }
    cpu::Value mask;
    cpu::SetMaskFromSteps(valid, B, T, &mask);
    out.lengths = std::move(mask.lengths);
    out.step_mask = std::move(mask.step_mask);
  }
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, T, spec.dim}));
  return CudaOk(LaunchEmbedding(in.dev.as<int64_t>(), plan.kernel.as<float>(), out.dev.as<float>(),
                                B * T, spec.dim, stream_),
                "embedding kernel");
}

std::vector<LayerPlacement> CudaCompiledModel::placements() const {
  std::vector<LayerPlacement> out;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    std::string reason = plans_[i].reason;
    if (plans_[i].rnn) {
      if (const std::string chosen = plans_[i].rnn->ChoicesSummary(); !chosen.empty()) {
        absl::StrAppend(&reason, "; chosen by timing: ", chosen);
      }
    }
    out.push_back({model_.layers[i].name, plans_[i].where == Where::kGpu ? "cuda" : "cpu",
                   std::move(reason)});
  }
  return out;
}

int64_t CudaCompiledModel::memory_bytes() const {
  size_t bytes = lengths_dev_.bytes() + step_mask_dev_.bytes();
  for (const LayerPlan& p : plans_) {
    if (p.rnn) bytes += p.rnn->memory_bytes();
    if (p.fused) bytes += p.fused->memory_bytes();
    bytes += p.kernel.bytes() + p.bias.bytes() + p.hy.bytes() + p.cy.bytes() + p.y.bytes() +
             p.h0.bytes() + p.c0.bytes() + p.device.params_a.bytes() + p.device.params_b.bytes() +
             p.device.scratch.bytes() + p.device.scratch_b.bytes();
    for (const DeviceBuffer& c : p.device.constants) bytes += c.bytes();
  }
  for (const DevValue& v : values_) bytes += v.dev.bytes();
  return static_cast<int64_t>(bytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledModel>> CompileForGpu(const Model& model,
                                                             const CompileOptions& options,
                                                             int device) {
  RNNSERVE_RETURN_IF_ERROR(model.Validate());
  auto compiled = std::make_unique<CudaCompiledModel>(model, options, device);
  RNNSERVE_RETURN_IF_ERROR(compiled->Init());
  return std::unique_ptr<CompiledModel>(std::move(compiled));
}

int64_t HostCopiesInLastRun(const CompiledModel& model) {
  const auto* gpu = dynamic_cast<const CudaCompiledModel*>(&model);
  return gpu != nullptr ? gpu->host_copies_in_last_run() : 0;
}

}  // namespace rnnserve::engine::cuda
