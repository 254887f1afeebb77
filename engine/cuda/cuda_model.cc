#include "engine/cuda/cuda_model.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/resident_model.h"
#include "engine/lengths.h"
#include "engine/plan/masks.h"

namespace rnnserve::engine::cuda {
namespace {

const char* MathName(MathMode m) {
  switch (m) {
    case MathMode::kFp32:
      return "FP32";
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

// Which batches a layer that cuDNN cannot run (GRU reset_after=False) takes on FusedRnn's
// persistent kernels, for its placement reason.
std::string FusedRnnPlacement(const FusedRnn& f) {
  std::string kernels;
  if (f.has_one_block_registers()) {
    kernels = "any size on the one-block persistent register kernel (a block a group of sequences)";
  } else if (f.has_grid()) {
    // FusedRnn::ForwardFastest times the two for each batch size up to kMaxBatch.
    absl::StrAppend(&kernels, "up to ", FusedRnn::kMaxBatch, " on the persistent register kernel",
                    f.has_batched() ? " or the batch-tiled one, whichever is faster" : "");
  }
  if (f.has_batched()) {
    absl::StrAppend(&kernels, kernels.empty() ? "" : ", ", "up to ", FusedRnn::kMaxBatchedBatch,
                    " on the batch-tiled persistent kernel");
  }
  return absl::StrCat("; batches of ", kernels,
                      " (none empty and no masked steps inside a sequence)");
}

}  // namespace

CudaCompiledModel::~CudaCompiledModel() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  ClearGraphs();
  plans_.clear();
  values_.clear();
  for (cudaEvent_t e : layer_done_) {
    if (e) cudaEventDestroy(e);
  }
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
  use_graphs_ = options_.whole_batch_graphs;
  if (!use_graphs_) graph_note_ = "whole-batch graphs off";
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
    // Whole-batch graphs only for models whose launches follow from the batch's shapes: not
    // where the host reads the request's values to decide (Embedding's ids, Masking's
    // lengths). Other host reads are found per batch (cuda_model_graph.cc).
    const LayerSpec& spec = model_.layers[i].spec;
    if (use_graphs_ && (std::holds_alternative<EmbeddingSpec>(spec) ||
                        std::holds_alternative<MaskingSpec>(spec))) {
      use_graphs_ = false;
      graph_note_ = absl::StrCat("whole-batch graphs off: layer '", model_.layers[i].name,
                                 "' reads the request's values on the host");
    }
  }
  // Chains of recurrent layers that may run as a stack (RunRecurrentStack).
  for (size_t i = 0; i + 1 < model_.layers.size(); ++i) {
    const Layer& lower = model_.layers[i];
    const Layer& upper = model_.layers[i + 1];
    const auto* a = std::get_if<RecurrentSpec>(&lower.spec);
    const auto* b = std::get_if<RecurrentSpec>(&upper.spec);
    // Both on cuDNN's path (CudnnRecurrent), or both layers cuDNN cannot run (only those have a
    // fused_rnn) that FusedRnn's stacked kernel takes together.
    const LayerPlan& p = plans_[i];
    const LayerPlan& q = plans_[i + 1];
    const bool pair =
        (p.rnn && q.rnn) || (p.fused_rnn && q.fused_rnn && p.fused_rnn->Stacks(*q.fused_rnn));
    plans_[i].stacks_on_next =
        a != nullptr && b != nullptr && p.where == Where::kGpu && q.where == Where::kGpu && pair &&
        a->directions.size() == 1 && b->directions.size() == 1 && a->return_sequences &&
        upper.inputs.size() == 1 && !lower.outputs.empty() && upper.inputs[0] == lower.outputs[0] &&
        b->input_size == a->output_size();
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
    auto cpu_kernel = host_->NewRecurrent(*rnn, layer.name);
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
      if (auto f = FusedRnn::Create(*rnn, stream_); f.ok()) plan->fused_rnn = std::move(*f);
      plan->reason = absl::StrCat("fused CUDA recurrent kernel, exact FP32",
                                  options_.math_mode == MathMode::kFp32
                                      ? ""
                                      : absl::StrCat(" (it computes FP32 only; the model asks ",
                                                     MathName(options_.math_mode), ")"),
                                  plan->fused_rnn ? FusedRnnPlacement(*plan->fused_rnn) : "",
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
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec);
      op != nullptr &&
      (op->kind == TensorOpKind::kGatherAtLengths || op->kind == TensorOpKind::kZeroPastLengths)) {
    plan->reason = "request-lengths kernel (the batch's lengths, re-read at graph replays)";
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
  if (!batch.lengths.empty() && !lengths_honored_.ok()) return lengths_honored_;
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    const Tensor& t = batch.inputs[i];
    if (!batch.lengths.empty() && sequence_inputs_[i]) {
      RNNSERVE_RETURN_IF_ERROR(
          CheckLengths(batch.lengths, t.dim(time_major_ ? 1 : 0), t.dim(time_major_ ? 0 : 1),
                       absl::StrCat("input '", model_.inputs[i].name, "': lengths")));
    }
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(device_), "cudaSetDevice"));
  if (batch.stop && batch.stop()) {
    return absl::CancelledError("the run was stopped (Batch::stop) before it started");
  }
  if (!stream_idle_) {  // a failed Run may have left copies from the staging area in flight
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    stream_idle_ = true;
  }
  if (use_graphs_ && batch.initial_states.empty() && batch.final_states == nullptr) {
    const std::string key = GraphKeyOf(batch);
    auto replayed = Replay(key, batch, outputs);
    if (!replayed.ok() || *replayed) return replayed.status();
    auto seen = graph_keys_.find(key);
    if (seen != graph_keys_.end() && seen->second) {
      auto captured = RunCaptured(key, batch, outputs);
      if (!captured.ok() || *captured) return captured.status();
    } else if (seen == graph_keys_.end()) {
      if (graph_keys_.size() >= kMaxGraphKeys) graph_keys_.clear();
      graph_keys_.emplace(key, true);
    }
  }
  stream_idle_ = false;
  staging_.Reset();
  RNNSERVE_RETURN_IF_ERROR(EnqueueBatch(batch));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  stream_idle_ = true;
  CollectOutputs(outputs);
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::EnqueueBatch(const Batch& batch) {
  batch_ = &batch;
  absl::Cleanup forget = [this] { batch_ = nullptr; };
  for (DevValue& v : values_) {
    v.host_valid = v.dev_valid = false;
    v.input = nullptr;
    v.lengths.clear();
    v.step_mask.clear();
  }
  clean_.assign(values_.size(), 0);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    DevValue& v = values_[i];
    const Tensor& t = batch.inputs[i];
    v.input = &t;
    v.host_valid = true;
    v.dtype = t.dtype();
    v.shape = t.shape();
    if (!batch.lengths.empty() && sequence_inputs_[i]) v.lengths = batch.lengths;
  }
  if (slots_ != nullptr) {  // the rows' slots (SlotStates::Run), with the inputs
    const size_t bytes = slots_->rows->size() * sizeof(int32_t);
    RNNSERVE_RETURN_IF_ERROR(slot_rows_dev_.Reserve(std::max<size_t>(bytes, 1)));
    RNNSERVE_RETURN_IF_ERROR(CopyToDevice(slot_rows_dev_.get(), slots_->rows->data(), bytes,
                                          "cudaMemcpyAsync (slots)", UploadKind::kSlots));
  }
  host_copies_ = 0;
  layers_in_flight_ = 0;
  for (size_t l = 0; l < model_.layers.size(); ++l) {
    if (l > 0 && batch.stop && capture_ == nullptr) {
      auto stopped = StoppedBeforeLayer(batch);
      if (!stopped.ok()) return stopped.status();
      if (*stopped) {
        return absl::CancelledError(absl::StrCat("the run was stopped (Batch::stop) before layer '",
                                                 model_.layers[l].name, "'"));
      }
    }
    auto stacked = RunRecurrentStack(l, batch);
    if (!stacked.ok()) return stacked.status();
    if (*stacked > 0) {
      l += *stacked - 1;  // the layers above it ran too
      continue;
    }
    RNNSERVE_RETURN_IF_ERROR(RunLayer(l, batch));
  }
  host_copies_in_last_run_ = host_copies_;
  return EnqueueDownloads();
}

absl::StatusOr<bool> CudaCompiledModel::StoppedBeforeLayer(const Batch& batch) {
  for (cudaEvent_t& e : layer_done_) {
    if (e == nullptr) {
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    }
  }
  // The layers enqueued so far end at this event; the host waits for the one recorded a layer
  // earlier, so the GPU always has the last layer enqueued to run while the host asks.
  cudaEvent_t now = layer_done_[layers_in_flight_ % 2];
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventRecord(now, stream_), "cudaEventRecord"));
  if (layers_in_flight_ > 0) {
    cudaEvent_t before = layer_done_[(layers_in_flight_ + 1) % 2];
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventSynchronize(before), "cudaEventSynchronize"));
  }
  ++layers_in_flight_;
  return batch.stop();
}

absl::Status CudaCompiledModel::RunLayer(size_t index, const Batch& batch) {
  const Layer& layer = model_.layers[index];
  LayerPlan& plan = plans_[index];
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec);
      op != nullptr &&
      (op->kind == TensorOpKind::kGatherAtLengths || op->kind == TensorOpKind::kZeroPastLengths)) {
    return RunLengthsOp(layer, *op, batch);
  }
  if (plan.device_layer) {
    // Tensor ops may decide on the host from INT64 operands' values.
    // Tensor ops decide on the host from INT64 operands there: a graph may bake those in only
    // when they follow from the batch's shapes (shape arithmetic), not from its values.
    for (int id : layer.inputs) {
      if (id >= 0 && values_[id].dtype == DType::kInt64 && values_[id].host_valid && !clean_[id]) {
        NotReplayable("INT64 values of the request read on the host");
      }
    }
    for (int id : layer.inputs) {  // float operands from the host go through the staging area
      if (id >= 0 && values_[id].dtype == DType::kFloat32 && values_[id].host_valid) {
        RNNSERVE_RETURN_IF_ERROR(ToDevice(&values_[id]));
      }
    }
    auto done = RunDeviceLayer(layer, stream_, cublas_, plan.device, values_);
    if (!done.ok()) return done.status();
    if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec);
        op != nullptr && op->kind == TensorOpKind::kShape) {
      for (int id : layer.outputs) clean_[id] = 1;  // a shape, known from the batch's shapes
    }
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
    // Sequences of length 0 and interior masked steps, which neither cuDNN nor FusedRnn can
    // skip, run on the fused recurrent kernel, or on the CPU kernel where the layer has none.
    const bool plain = PlainSequences(in);
    const RecurrentKernel kernel =
        plain && plan.rnn ? RecurrentKernel::kCudnn
        : plain && plan.fused_rnn && plan.fused_rnn->Takes(static_cast<int>(in.shape[0]))
            ? RecurrentKernel::kFusedRnn
            : RecurrentKernel::kFusedRecurrent;
    if (plan.where == Where::kCpu || in.shape[0] == 0 || in.shape[1] == 0 ||
        (kernel == RecurrentKernel::kFusedRecurrent && !plan.fused)) {
      return RunRecurrentCpu(layer, plan, batch);
    }
    return RunRecurrentGpu(layer, *rnn, plan, kernel, batch);
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
    clean_[layer.outputs[0]] = clean_[layer.inputs[0]];
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
  // Its outputs follow from the batch's shapes alone when its inputs do (shape arithmetic), or
  // when it reads only its operand's shape; else from the request's values (clean_).
  const auto* op = std::get_if<TensorOpSpec>(&layer.spec);
  bool clean = op != nullptr && op->kind == TensorOpKind::kShape;
  if (!clean) {
    clean = std::all_of(layer.inputs.begin(), layer.inputs.end(),
                        [&](int id) { return id < 0 || clean_[id] != 0; });
  }
  // The layer's inputs on the host, in the CPU engine's value slots (copies: a value may be
  // read by several layers); its outputs moved back into this model's values.
  for (int id : layer.inputs) {
    DevValue& v = values_[id];
    RNNSERVE_RETURN_IF_ERROR(ToHost(&v));
    host_values_[id] = HostValue{v.host_tensor(), v.lengths, v.step_mask};
  }
  const absl::Status s = host_->RunLayer(layer, &host_values_);
  for (int id : layer.inputs) host_values_[id] = HostValue{};
  if (!s.ok()) {
    for (int id : layer.outputs) host_values_[id] = HostValue{};
    return s;
  }
  for (int id : layer.outputs) {
    HostValue& hv = host_values_[id];
    DevValue& out = values_[id];
    out.input = nullptr;
    out.host = std::move(hv.tensor);
    out.lengths = std::move(hv.lengths);
    out.step_mask = std::move(hv.step_mask);
    out.dtype = out.host.dtype();
    out.shape = out.host.shape();
    out.host_valid = true;
    out.dev_valid = false;
    clean_[id] = clean ? 1 : 0;
    hv = HostValue{};
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
  NotReplayable("Embedding ids");  // checked (and mask_zero read) on the host
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
    engine::plan::MaskFromSteps(valid, B, T, &out.lengths, &out.step_mask);
  }
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, T, spec.dim}));
  return CudaOk(LaunchEmbedding(in.dev.as<int64_t>(), plan.kernel.as<float>(), out.dev.as<float>(),
                                B * T, spec.dim, stream_),
                "embedding kernel");
}

std::vector<LayerPlacement> CudaCompiledModel::placements() const {
  std::vector<LayerPlacement> out;
  const ResidentPlan resident = PlanResident(model_);
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    std::string reason = plans_[i].reason;
    if (std::holds_alternative<RecurrentSpec>(model_.layers[i].spec)) {
      absl::StrAppend(&reason, resident.layer == &model_.layers[i]
                                   ? "; resident_step_loop: runs in the resident loop"
                                   : "; resident_step_loop: chunked (" + resident.why + ")");
    }
    if (plans_[i].rnn) {
      if (const std::string chosen = plans_[i].rnn->ChoicesSummary(); !chosen.empty()) {
        absl::StrAppend(&reason, "; chosen by timing: ", chosen);
      }
    } else if (plans_[i].fused_rnn) {
      if (const std::string chosen = plans_[i].fused_rnn->ChainSummary(); !chosen.empty()) {
        absl::StrAppend(&reason, "; chosen by timing: ", chosen);
      }
    }
    out.push_back({model_.layers[i].name, plans_[i].where == Where::kGpu ? "cuda" : "cpu",
                   std::move(reason)});
  }
  return out;
}

int64_t CudaCompiledModel::memory_bytes() const {
  size_t bytes = lengths_dev_.bytes() + step_mask_dev_.bytes() + request_lengths_dev_.bytes();
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

absl::StatusOr<std::unique_ptr<CompiledModel>> CompileForGpu(
    const Model& model, const CompileOptions& options, int device,
    std::shared_ptr<const HostFallback> host) {
  if (host == nullptr) return absl::InvalidArgumentError("CompileForGpu needs a host fallback");
  RNNSERVE_RETURN_IF_ERROR(model.Validate());
  LengthsRewrite rewrite = RewriteForLengths(model);
  RNNSERVE_RETURN_IF_ERROR(rewrite.model.Validate());
  auto compiled =
      std::make_unique<CudaCompiledModel>(std::move(rewrite), options, device, std::move(host));
  RNNSERVE_RETURN_IF_ERROR(compiled->Init());
  return std::unique_ptr<CompiledModel>(std::move(compiled));
}

}  // namespace rnnserve::engine::cuda
