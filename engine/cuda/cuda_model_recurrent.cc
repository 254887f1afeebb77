// The GPU engine's recurrent layers: on cuDNN or the fused kernel (initial states, the
// sequence and final outputs, bidirectional merges, return_state), or on the CPU engine's
// kernel for the batches neither can run.

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

absl::Status CudaCompiledModel::RunRecurrentCpu(const Layer& layer, LayerPlan& plan,
                                                const Batch& batch) {
  NotReplayable("a recurrent layer on the host");
  DevValue& in = values_[layer.inputs[0]];
  RNNSERVE_RETURN_IF_ERROR(ToHost(&in));
  std::vector<int32_t> lengths = in.lengths;
  if (lengths.empty()) lengths.assign(in.shape[0], static_cast<int32_t>(in.shape[1]));
  const RecurrentSpec& spec = std::get<RecurrentSpec>(layer.spec);
  const int B = static_cast<int>(in.shape[0]);
  const std::array<float*, 2>* slots = SlotStore(plan);
  std::vector<Tensor> initial;
  for (size_t i = 1; i < layer.inputs.size(); ++i) {
    RNNSERVE_RETURN_IF_ERROR(ToHost(&values_[layer.inputs[i]]));
    initial.push_back(values_[layer.inputs[i]].host_tensor());
  }
  if (slots != nullptr) {
    auto from_slots = SlotStatesToHost(spec, plan, *slots, B);
    if (!from_slots.ok()) return from_slots.status();
    initial = *std::move(from_slots);
  } else if (initial.empty()) {
    if (auto it = batch.initial_states.find(layer.name); it != batch.initial_states.end()) {
      initial = it->second;
    }
  }
  std::vector<Tensor> results, finals;
  const bool want_finals = batch.final_states != nullptr || slots != nullptr;
  RNNSERVE_RETURN_IF_ERROR(plan.cpu_rnn->Run(in.host_tensor(), lengths, in.step_mask, initial,
                                             &results, want_finals ? &finals : nullptr,
                                             batch.continues));
  if (slots != nullptr) {
    RNNSERVE_RETURN_IF_ERROR(SlotStatesFromHost(spec, plan, *slots, finals, B));
  } else if (batch.final_states) {
    (*batch.final_states)[layer.name] = std::move(finals);
  }
  const bool seq = spec.return_sequences;
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
                                                LayerPlan& plan, RecurrentKernel kernel,
                                                const Batch& batch) {
  RecurrentRun run;
  RNNSERVE_RETURN_IF_ERROR(BeginRecurrentGpu(layer, spec, plan, batch, &run));
  const RecurrentIO& io = run.io;
  if (kernel == RecurrentKernel::kCudnn) {
    RNNSERVE_RETURN_IF_ERROR(plan.rnn->Forward(io));
    if (capture_ != nullptr && plan.rnn->last_bakes_lengths()) {
      capture_->graph->exact_lengths = true;
    }
  } else if (kernel == RecurrentKernel::kFusedRnn) {
    RNNSERVE_RETURN_IF_ERROR(plan.fused_rnn->ForwardFastest(io));
    RNNSERVE_RETURN_IF_ERROR(RepeatKerasLastOutputs(spec, io, stream_));
  } else {
    const DevValue& in = values_[layer.inputs[0]];
    const uint8_t* mask = nullptr;
    if (!in.step_mask.empty()) {
      RNNSERVE_RETURN_IF_ERROR(step_mask_dev_.Reserve(in.step_mask.size()));
      RNNSERVE_RETURN_IF_ERROR(CopyToDevice(step_mask_dev_.get(), in.step_mask.data(),
                                            in.step_mask.size(), "cudaMemcpyAsync (step mask)"));
      mask = step_mask_dev_.as<uint8_t>();
    }
    RNNSERVE_RETURN_IF_ERROR(plan.fused->Forward(io, mask));
  }
  return EndRecurrentGpu(layer, spec, plan, batch, run);
}

absl::StatusOr<size_t> CudaCompiledModel::RunRecurrentStack(size_t index, const Batch& batch) {
  if (!plans_[index].stacks_on_next) return 0;
  size_t end = index + 1;  // the chain [index, end)
  while (plans_[end - 1].stacks_on_next) ++end;
  const Layer& bottom = model_.layers[index];
  const auto& bottom_spec = std::get<RecurrentSpec>(bottom.spec);
  const DevValue& in = values_[bottom.inputs[0]];
  // Batches that every layer runs on cuDNN's path (CudnnRecurrent), or (layers cuDNN cannot
  // run) on FusedRnn, as RunLayer would choose; RunLayer runs (and refuses) the others.
  if (!PlainSequences(in) || in.shape.size() != 3 || in.shape[0] == 0 || in.shape[1] == 0 ||
      in.dtype != DType::kFloat32 || in.shape[2] != bottom_spec.input_size) {
    return 0;
  }
  const bool fused = !plans_[index].rnn;  // FusedRnn::ForwardChain
  for (size_t l = index; fused && l < end; ++l) {
    if (!plans_[l].fused_rnn->Takes(static_cast<int>(in.shape[0]))) return 0;
  }
  const std::vector<int32_t>& lengths = in.lengths;  // the bottom's input: not written below
  std::vector<RecurrentRun> runs(end - index);  // not resized below: io.lengths points into each
  std::vector<CudnnRecurrent::StackEntry> entries;
  std::vector<FusedRnn::StackLayer> chain;
  for (size_t l = index; l < end; ++l) {
    const Layer& layer = model_.layers[l];
    if (l > index) {  // the lower layer's sequence, written by the launches to come
      DevValue& mid = values_[layer.inputs[0]];
      mid.lengths = lengths;
      mid.step_mask.clear();
    }
    RecurrentRun& run = runs[l - index];
    RNNSERVE_RETURN_IF_ERROR(
        BeginRecurrentGpu(layer, std::get<RecurrentSpec>(layer.spec), plans_[l], batch, &run));
    if (fused) {
      chain.push_back({plans_[l].fused_rnn.get(), run.io});
    } else {
      entries.push_back({plans_[l].rnn.get(), run.io});
    }
  }
  RNNSERVE_RETURN_IF_ERROR(fused ? FusedRnn::ForwardChain(chain)
                                 : CudnnRecurrent::ForwardStack(entries));
  for (size_t l = index; l < end; ++l) {
    const Layer& layer = model_.layers[l];
    if (fused) {
      RNNSERVE_RETURN_IF_ERROR(
          RepeatKerasLastOutputs(std::get<RecurrentSpec>(layer.spec), runs[l - index].io, stream_));
    } else if (capture_ != nullptr && plans_[l].rnn->last_bakes_lengths()) {
      capture_->graph->exact_lengths = true;
    }
    RNNSERVE_RETURN_IF_ERROR(EndRecurrentGpu(layer, std::get<RecurrentSpec>(layer.spec), plans_[l],
                                             batch, runs[l - index]));
  }
  return end - index;
}

absl::Status CudaCompiledModel::BeginRecurrentGpu(const Layer& layer, const RecurrentSpec& spec,
                                                  LayerPlan& plan, const Batch& batch,
                                                  RecurrentRun* run) {
  DevValue& in = values_[layer.inputs[0]];
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in));
  const int B = static_cast<int>(in.shape[0]), T = static_cast<int>(in.shape[1]);
  const int dirs = static_cast<int>(spec.directions.size()), H = spec.hidden_size,
            Hp = spec.output_size();
  const bool lstm = spec.cell == CellType::kLstm;
  run->lengths = in.lengths;
  std::vector<int32_t>& lengths = run->lengths;
  if (lengths.empty()) lengths.assign(B, T);
  RNNSERVE_RETURN_IF_ERROR(lengths_dev_.Reserve(B * sizeof(int32_t)));
  // To a graph being captured: fixed by its key (none: every row runs T steps), or the batch's
  // lengths (propagated unchanged); lengths derived on the host make it eager.
  const UploadKind lengths_kind = in.lengths.empty()            ? UploadKind::kConstant
                                  : in.lengths == batch.lengths ? UploadKind::kLengths
                                                                : UploadKind::kOther;
  RNNSERVE_RETURN_IF_ERROR(CopyToDevice(lengths_dev_.get(), lengths.data(), B * sizeof(int32_t),
                                        "cudaMemcpyAsync (lengths)", lengths_kind));
  // A slot run's rows start from their slots' states (gathered on the device); other runs from
  // the layer's state inputs or the batch's initial states.
  run->slots = SlotStore(plan);
  const std::array<float*, 2>* slots = run->slots;
  absl::StatusOr<bool> has_initial = true;
  if (slots != nullptr) {
    RNNSERVE_RETURN_IF_ERROR(plan.h0.Reserve(sizeof(float) * B * Hp));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows((*slots)[0], slot_rows_dev_.as<int32_t>(),
                                                   plan.h0.as<float>(), nullptr, B, Hp, stream_),
                                    "slot state gather kernel"));
    if (lstm) {
      RNNSERVE_RETURN_IF_ERROR(plan.c0.Reserve(sizeof(float) * B * H));
      RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows((*slots)[1], slot_rows_dev_.as<int32_t>(),
                                                     plan.c0.as<float>(), nullptr, B, H, stream_),
                                      "slot state gather kernel"));
    }
  } else {
    has_initial = UploadInitialStates(layer, spec, plan, batch, B);
    if (!has_initial.ok()) return has_initial.status();
  }

  RNNSERVE_RETURN_IF_ERROR(plan.hy.Reserve(sizeof(float) * dirs * B * Hp));  // [dirs, B, H']
  RNNSERVE_RETURN_IF_ERROR(plan.cy.Reserve(sizeof(float) * dirs * B * H));   // [dirs, B, H]
  // The sequence goes straight into the output value when no merge kernel follows.
  run->direct = spec.return_sequences && (dirs == 1 || spec.merge == MergeMode::kConcat);
  auto y = SequenceTarget(layer, spec, plan, B, T, run->direct);
  if (!y.ok()) return y.status();
  run->io = RecurrentIO{.B = B,
                        .T = T,
                        .lengths = lengths,
                        .lengths_dev = lengths_dev_.as<int32_t>(),
                        .x = in.dev.as<float>(),
                        .h0 = *has_initial ? plan.h0.as<float>() : nullptr,
                        .c0 = *has_initial && lstm ? plan.c0.as<float>() : nullptr,
                        .y = *y,
                        .hy = plan.hy.as<float>(),
                        .cy = lstm ? plan.cy.as<float>() : nullptr,
                        .continues = batch.continues};
  return absl::OkStatus();
}

absl::Status CudaCompiledModel::EndRecurrentGpu(const Layer& layer, const RecurrentSpec& spec,
                                                LayerPlan& plan, const Batch& batch,
                                                const RecurrentRun& run) {
  const int B = run.io.B, T = run.io.T, H = spec.hidden_size, Hp = spec.output_size();
  const bool lstm = spec.cell == CellType::kLstm;
  const std::array<float*, 2>* slots = run.slots;
  if (slots != nullptr) {  // the final states back into the rows' slots
    RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows(plan.hy.as<float>(), nullptr, (*slots)[0],
                                                   slot_rows_dev_.as<int32_t>(), B, Hp, stream_),
                                    "slot state scatter kernel"));
    if (lstm) {
      RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows(plan.cy.as<float>(), nullptr, (*slots)[1],
                                                     slot_rows_dev_.as<int32_t>(), B, H, stream_),
                                      "slot state scatter kernel"));
    }
  } else if (batch.final_states != nullptr) {
    RNNSERVE_RETURN_IF_ERROR(DownloadFinalStates(layer, spec, plan, B, batch));
  }
  auto next_output = WriteMainOutputs(layer, spec, plan, B, T, run.io.y, run.direct);
  if (!next_output.ok()) return next_output.status();
  const DevValue& in = values_[layer.inputs[0]];
  DevValue& out = values_[layer.outputs[0]];
  out.lengths.clear();
  out.step_mask.clear();
  if (spec.return_sequences) {  // the mask travels on with a returned sequence (none: full)
    out.lengths = in.lengths;
    out.step_mask = in.step_mask;
  }
  if (!spec.return_state) return absl::OkStatus();
  return WriteStateOutputs(layer, spec, plan, B, *next_output);
}

absl::StatusOr<bool> CudaCompiledModel::UploadInitialStates(const Layer& layer,
                                                            const RecurrentSpec& spec,
                                                            LayerPlan& plan, const Batch& batch,
                                                            int B) {
  // The layer's state inputs or, for a stateful batch, the request's states by layer name; one
  // [B, size] tensor per state (h, c per direction), which the kernels read stacked:
  // h0 [dirs, B, H'], c0 [dirs, B, H].
  const int dirs = static_cast<int>(spec.directions.size()), H = spec.hidden_size,
            Hp = spec.output_size();
  const int per_dir = spec.cell == CellType::kLstm ? 2 : 1;
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
    float* dst = (is_c ? plan.c0.as<float>() : plan.h0.as<float>()) +
                 static_cast<int64_t>(i / per_dir) * B * size;
    const size_t bytes = sizeof(float) * B * size;
    if (value == nullptr) {  // the batch's own states, on the host
      RNNSERVE_RETURN_IF_ERROR(
          CopyToDevice(dst, (*given)[i].f32(), bytes, "cudaMemcpyAsync (initial state)"));
      continue;
    }
    RNNSERVE_RETURN_IF_ERROR(ToDevice(value));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemcpyAsync(dst, value->dev.get(), bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync (initial state)"));
  }
  return n_init > 0;
}

absl::StatusOr<float*> CudaCompiledModel::SequenceTarget(const Layer& layer,
                                                         const RecurrentSpec& spec, LayerPlan& plan,
                                                         int B, int T, bool direct) {
  if (!spec.return_sequences) return nullptr;
  const int dirs = static_cast<int>(spec.directions.size()), Hp = spec.output_size();
  if (direct) {
    DevValue& out = values_[layer.outputs[0]];
    RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, T, dirs * Hp}));
    return out.dev.as<float>();
  }
  RNNSERVE_RETURN_IF_ERROR(plan.y.Reserve(sizeof(float) * B * T * dirs * Hp));
  return plan.y.as<float>();
}

absl::Status CudaCompiledModel::DownloadFinalStates(const Layer& layer, const RecurrentSpec& spec,
                                                    LayerPlan& plan, int B, const Batch& batch) {
  // Per direction h [B, H'] then, for LSTM, c [B, H]: the state after each sequence's last
  // valid step, from hy [dirs, B, H'] and cy [dirs, B, H].
  const int dirs = static_cast<int>(spec.directions.size()), H = spec.hidden_size,
            Hp = spec.output_size();
  const int per_dir = spec.cell == CellType::kLstm ? 2 : 1;
  std::vector<Tensor> finals;
  for (int d = 0; d < dirs; ++d) {
    for (int k = 0; k < per_dir; ++k) {
      const int size = k == 1 ? H : Hp;
      const float* src =
          (k == 1 ? plan.cy.as<float>() : plan.hy.as<float>()) + static_cast<int64_t>(d) * B * size;
      Tensor t = Tensor::Float({B, size});
      RNNSERVE_RETURN_IF_ERROR(CudaOk(
          cudaMemcpyAsync(t.f32(), src, sizeof(float) * B * size, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (final state)"));
      finals.push_back(std::move(t));
    }
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  (*batch.final_states)[layer.name] = std::move(finals);
  return absl::OkStatus();
}

absl::StatusOr<size_t> CudaCompiledModel::WriteMainOutputs(const Layer& layer,
                                                           const RecurrentSpec& spec,
                                                           LayerPlan& plan, int B, int T,
                                                           const float* y, bool direct) {
  // [B, T, ...] sequences or [B, ...] final outputs, merged per merge mode.
  if (direct) return 1;
  const int dirs = static_cast<int>(spec.directions.size()), Hp = spec.output_size();
  const bool seq = spec.return_sequences;
  const int64_t rows = seq ? int64_t{B} * T : B;
  const float* a = seq ? y : plan.hy.as<float>();
  const float* b = seq ? y + Hp : plan.hy.as<float>() + int64_t{B} * Hp;
  const int64_t stride = seq ? dirs * Hp : Hp;
  DevValue& out = values_[layer.outputs[0]];
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
    return 2;
  }
  if (dirs == 1) {
    RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(out.dev.get(), a, rows * Hp * sizeof(float),
                                                    cudaMemcpyDeviceToDevice, stream_),
                                    "cudaMemcpyAsync (final output)"));
    return 1;
  }
  MergeOp op = MergeOp::kConcat;
  if (spec.merge == MergeMode::kSum) op = MergeOp::kSum;
  if (spec.merge == MergeMode::kMul) op = MergeOp::kMul;
  if (spec.merge == MergeMode::kAve) op = MergeOp::kAve;
  if (op == MergeOp::kConcat) shape.back() = 2 * Hp;
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, shape));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(LaunchMerge(a, stride, b, stride, out.dev.as<float>(), rows, Hp, op, stream_),
             "bidirectional merge kernel"));
  return 1;
}

absl::Status CudaCompiledModel::WriteStateOutputs(const Layer& layer, const RecurrentSpec& spec,
                                                  LayerPlan& plan, int B, size_t next_output) {
  const int dirs = static_cast<int>(spec.directions.size()), H = spec.hidden_size,
            Hp = spec.output_size();
  const int per_dir = spec.cell == CellType::kLstm ? 2 : 1;
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
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cuda
