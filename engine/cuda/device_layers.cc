#include "engine/cuda/device_layers.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_layer_util.h"
#include "engine/cuda/device_tensor_ops.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/plan/layer_plans.h"
#include "engine/plan/masks.h"

namespace rnnserve::engine::cuda {
namespace {

// The Keras layers.

absl::Status RunBatchNorm(const Layer& layer, const BatchNormSpec& spec, cudaStream_t stream,
                          DeviceLayerState& state, DevValue& in, DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(plan::CheckBatchNormInput(spec, layer.name, in.dtype, in.shape));
  const int64_t c = static_cast<int64_t>(spec.mean.size());
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, in.shape));
  KeepMask(in, &out);
  return CudaOk(
      LaunchScaleShift(in.dev.as<float>(), out.dev.as<float>(), state.params_a.as<float>(),
                       state.params_b.as<float>(), NumElements(in.shape) / std::max<int64_t>(c, 1),
                       static_cast<int>(c), stream),
      "batch normalisation kernel");
}

absl::Status RunLayerNorm(const Layer& layer, const LayerNormSpec& spec, cudaStream_t stream,
                          DeviceLayerState& state, DevValue& in, DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(plan::CheckLayerNormInput(spec, layer.name, in.dtype, in.shape));
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, in.shape));
  KeepMask(in, &out);
  const int64_t c = in.shape.back();
  return CudaOk(LaunchLayerNorm(in.dev.as<float>(), out.dev.as<float>(),
                                spec.gamma.empty() ? nullptr : state.params_a.as<float>(),
                                spec.beta.empty() ? nullptr : state.params_b.as<float>(),
                                c == 0 ? 0 : NumElements(in.shape) / c, static_cast<int>(c),
                                spec.epsilon, stream),
                "layer normalisation kernel");
}

absl::Status RunSoftmax(const Layer& layer, const SoftmaxSpec& spec, cudaStream_t stream,
                        DevValue& in, DevValue& out) {
  auto axis = plan::SoftmaxAxis(spec, layer.name, in.dtype, in.shape);
  if (!axis.ok()) return axis.status();
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, in.shape));
  KeepMask(in, &out);
  RNNSERVE_RETURN_IF_ERROR(CopyOnDevice(in, &out, stream));
  return SoftmaxInPlace(out, *axis, false, false, false, stream);
}

absl::Status RunConv1D(const Layer& layer, const Conv1DSpec& spec, cudaStream_t stream,
                       cublasHandle_t cublas, DeviceLayerState& state, DevValue& in,
                       DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(plan::CheckSequence(layer.name, in.dtype, in.shape, spec.in_channels));
  const int64_t B = in.shape[0], T = in.shape[1], Ci = spec.in_channels, Co = spec.out_channels;
  const int64_t K = spec.kernel_size;
  const plan::Window w = plan::Conv1DWindow(spec, T);
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, w.out_len, Co}));
  DropMask(&out);
  const int64_t rows = B * w.out_len;
  if (rows == 0) return absl::OkStatus();
  RNNSERVE_RETURN_IF_ERROR(state.scratch.Reserve(sizeof(float) * rows * K * Ci));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(LaunchIm2Col1D(in.dev.as<float>(), state.scratch.as<float>(), B, T, Ci, w.out_len, K,
                            spec.stride, spec.dilation, w.pad_left, stream),
             "im2col kernel"));
  RNNSERVE_RETURN_IF_ERROR(RowMajorGemm(cublas, state.scratch.as<float>(),
                                        state.params_a.as<float>(), out.dev.as<float>(), rows,
                                        K * Ci, Co, "cublasSgemm (Conv1D)"));
  return BiasAndActivation(out.dev.as<float>(),
                           spec.bias.empty() ? nullptr : state.params_b.as<float>(), rows,
                           static_cast<int>(Co), spec.activation, stream);
}

absl::Status RunPool1D(const Layer& layer, const Pool1DSpec& spec, cudaStream_t stream,
                       DevValue& in, DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(plan::CheckSequence(layer.name, in.dtype, in.shape, 0));
  const int64_t B = in.shape[0], T = in.shape[1], C = in.shape[2];
  const plan::Window w = plan::PlanWindow(T, spec.pool_size, spec.stride, spec.same_padding, false);
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, w.out_len, C}));
  DropMask(&out);
  return CudaOk(
      LaunchPool1D(in.dev.as<float>(), out.dev.as<float>(), B, T, C, w.out_len, spec.pool_size,
                   spec.stride, w.pad_left, spec.kind == Pool1DSpec::Kind::kMax, stream),
      "pooling kernel");
}

absl::Status RunGlobalPool1D(const Layer& layer, const GlobalPool1DSpec& spec, cudaStream_t stream,
                             DeviceLayerState& state, DevValue& in, DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(plan::CheckSequence(layer.name, in.dtype, in.shape, 0));
  const int64_t B = in.shape[0], T = in.shape[1], C = in.shape[2];
  const bool max = spec.kind == GlobalPool1DSpec::Kind::kMax;
  const int32_t* lengths = nullptr;
  const uint8_t* steps = nullptr;
  if (!max && !in.lengths.empty()) {
    RNNSERVE_RETURN_IF_ERROR(
        Upload(in.lengths.data(), in.lengths.size() * sizeof(int32_t), &state.scratch, stream));
    lengths = state.scratch.as<int32_t>();
  }
  if (!max && !in.step_mask.empty()) {
    RNNSERVE_RETURN_IF_ERROR(
        Upload(in.step_mask.data(), in.step_mask.size(), &state.scratch_b, stream));
    steps = state.scratch_b.as<uint8_t>();
  }
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, {B, C}));
  DropMask(&out);
  return CudaOk(LaunchGlobalPool1D(in.dev.as<float>(), out.dev.as<float>(), B, T, C, lengths, steps,
                                   max, stream),
                "global pooling kernel");
}

// Flatten and Reshape: the same elements under a new shape.
absl::Status Relabel(cudaStream_t stream, DevValue& in, DevValue& out, Shape shape) {
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  const DType dtype = in.dtype;
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, dtype, std::move(shape)));
  DropMask(&out);
  return CopyOnDevice(in, &out, stream);
}

absl::Status RunRepeatVector(const Layer& layer, const RepeatVectorSpec& spec, cudaStream_t stream,
                             DevValue& in, DevValue& out) {
  auto shape = plan::RepeatVectorShape(spec, layer.name, in.dtype, in.shape);
  if (!shape.ok()) return shape.status();
  const int64_t C = in.shape[1];
  RNNSERVE_RETURN_IF_ERROR(ToDevice(&in, stream));
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, *shape));
  DropMask(&out);
  IndexMap map;
  ToMap(*shape, {C, 0, 1}, &map);
  return CudaOk(LaunchStridedCopy(in.dev.as<float>(), 0, map, out.dev.as<float>(), stream),
                "repeat kernel");
}

absl::Status RunMerge(const Layer& layer, const MergeSpec& spec, cudaStream_t stream,
                      std::vector<DevValue>& values, DevValue& out) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (int id : layer.inputs) {
    shapes.push_back(values[id].shape);
    dtypes.push_back(values[id].dtype);
  }
  auto shape = plan::MergeShape(spec, layer.name, shapes, dtypes);
  if (!shape.ok()) return shape.status();
  std::vector<plan::MaskRef> masks;
  for (int id : layer.inputs) {
    DevValue& v = values[id];
    RNNSERVE_RETURN_IF_ERROR(ToDevice(&v, stream));
    masks.push_back({&v.lengths, &v.step_mask});
  }
  std::vector<int32_t> merged_lengths;
  std::vector<uint8_t> merged_steps;
  plan::MergeMasks(masks, &merged_lengths, &merged_steps);
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, *shape));
  out.lengths = std::move(merged_lengths);
  out.step_mask = std::move(merged_steps);
  const int rank = static_cast<int>(shape->size());
  if (spec.kind == MergeSpec::Kind::kConcatenate) {
    const int axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
    int64_t outer = 1;
    for (int i = 0; i < axis; ++i) outer *= (*shape)[i];
    std::vector<const float*> srcs;
    std::vector<int64_t> chunks;
    for (int id : layer.inputs) {
      srcs.push_back(values[id].dev.as<float>());
      chunks.push_back(outer == 0 ? 0 : NumElements(values[id].shape) / outer);
    }
    return ConcatRows(srcs, chunks, outer, outer == 0 ? 0 : NumElements(*shape) / outer,
                      out.dev.as<float>(), stream);
  }
  // By MergeSpec::Kind: concatenate (not here), add, subtract, multiply, average (a sum,
  // divided below), maximum, minimum.
  static constexpr BinaryOp kOps[] = {BinaryOp::kAdd, BinaryOp::kAdd, BinaryOp::kSub,
                                      BinaryOp::kMul, BinaryOp::kAdd, BinaryOp::kMax,
                                      BinaryOp::kMin};
  const BinaryOp op = kOps[static_cast<int>(spec.kind)];
  // Left to right, as the CPU engine accumulates: out = in0 op in1, then out = out op in_k.
  const float* acc = values[layer.inputs[0]].dev.as<float>();
  Shape acc_shape = values[layer.inputs[0]].shape;
  for (size_t k = 1; k < layer.inputs.size(); ++k) {
    const DevValue& v = values[layer.inputs[k]];
    auto done = BroadcastBinary(acc, acc_shape, v.dev.as<float>(), v.shape, *shape,
                                out.dev.as<float>(), op, stream);
    if (!done.ok()) return done.status();
    if (!*done) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': rank ", rank,
                                                     " exceeds the GPU engine's ", kMaxKernelRank));
    }
    acc = out.dev.as<float>();
    acc_shape = *shape;
  }
  if (spec.kind != MergeSpec::Kind::kAverage) return absl::OkStatus();
  return CudaOk(
      LaunchUnary(out.dev.as<float>(), out.dev.as<float>(), NumElements(*shape), UnaryOp::kDivBy,
                  DeviceActivation{}, static_cast<float>(layer.inputs.size()), stream),
      "average kernel");
}

}  // namespace

absl::Status BiasAndActivation(float* y, const float* bias, int64_t rows, int cols,
                               const Activation& act, cudaStream_t stream) {
  const bool softmax = act.kind == ActivationKind::kSoftmax;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(LaunchBiasActivation(y, bias, rows, cols,
                                  softmax ? DeviceActivation{} : KernelActivation(act), stream),
             "bias/activation kernel"));
  if (!softmax) return absl::OkStatus();
  return CudaOk(LaunchSoftmaxRows(y, rows, cols, stream), "softmax kernel");
}

absl::StatusOr<DevicePlacement> PlanDeviceLayer(const Layer& layer, cudaStream_t stream,
                                                DeviceLayerState* state) {
  const std::string host =
      absl::StrCat("host, the CPU engine's layer in FP32 (no GPU kernel for ", layer.source_class,
                   " yet): its values move through host memory");
  return std::visit(
      [&](const auto& spec) -> absl::StatusOr<DevicePlacement> {
        using S = std::decay_t<decltype(spec)>;
        if constexpr (std::is_same_v<S, BatchNormSpec>) {
          RNNSERVE_RETURN_IF_ERROR(plan::ValidateBatchNorm(spec, layer.name));
          std::vector<float> scale, shift;
          plan::FoldBatchNorm(spec, &scale, &shift);
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(scale, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(shift, &state->params_b, stream));
          return DevicePlacement{true, "scale/shift kernel (moving statistics folded at load)"};
        } else if constexpr (std::is_same_v<S, LayerNormSpec>) {
          RNNSERVE_RETURN_IF_ERROR(plan::ValidateLayerNorm(spec, layer.name));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.gamma, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.beta, &state->params_b, stream));
          return DevicePlacement{true, "layer normalisation kernel (a block per row, double sums)"};
        } else if constexpr (std::is_same_v<S, SoftmaxSpec>) {
          return DevicePlacement{true, absl::StrCat("softmax kernel over axis ", spec.axis)};
        } else if constexpr (std::is_same_v<S, Conv1DSpec>) {
          RNNSERVE_RETURN_IF_ERROR(plan::ValidateConv1D(spec, layer.name));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.kernel, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.bias, &state->params_b, stream));
          return DevicePlacement{true,
                                 "im2col kernel + cuBLAS SGEMM + bias/activation kernel, FP32"};
        } else if constexpr (std::is_same_v<S, Pool1DSpec>) {
          RNNSERVE_RETURN_IF_ERROR(plan::ValidatePool1D(spec, layer.name));
          return DevicePlacement{true, "pooling kernel"};
        } else if constexpr (std::is_same_v<S, GlobalPool1DSpec>) {
          return DevicePlacement{true, "global pooling kernel (the Keras mask's valid steps)"};
        } else if constexpr (std::is_same_v<S, FlattenSpec> || std::is_same_v<S, ReshapeSpec>) {
          return DevicePlacement{true, "device copy under the new shape"};
        } else if constexpr (std::is_same_v<S, RepeatVectorSpec>) {
          return DevicePlacement{true, "strided copy kernel"};
        } else if constexpr (std::is_same_v<S, MergeSpec>) {
          return DevicePlacement{true, spec.kind == MergeSpec::Kind::kConcatenate
                                           ? "cudaMemcpy2DAsync per input"
                                           : "broadcast elementwise kernel"};
        } else if constexpr (std::is_same_v<S, TensorOpSpec>) {
          return PlanDeviceTensorOp(spec, stream, state);
        } else {
          return DevicePlacement{false, host};
        }
      },
      layer.spec);
}

absl::StatusOr<bool> RunDeviceLayer(const Layer& layer, cudaStream_t stream, cublasHandle_t cublas,
                                    DeviceLayerState& state, std::vector<DevValue>& values) {
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec)) {
    return RunDeviceTensorOp(layer, *op, stream, cublas, state, values);
  }
  DevValue& in = values[layer.inputs.at(0)];
  DevValue& out = values[layer.outputs.at(0)];
  absl::Status s = std::visit(
      [&](const auto& spec) -> absl::Status {
        using S = std::decay_t<decltype(spec)>;
        if constexpr (std::is_same_v<S, BatchNormSpec>) {
          return RunBatchNorm(layer, spec, stream, state, in, out);
        } else if constexpr (std::is_same_v<S, LayerNormSpec>) {
          return RunLayerNorm(layer, spec, stream, state, in, out);
        } else if constexpr (std::is_same_v<S, SoftmaxSpec>) {
          return RunSoftmax(layer, spec, stream, in, out);
        } else if constexpr (std::is_same_v<S, Conv1DSpec>) {
          return RunConv1D(layer, spec, stream, cublas, state, in, out);
        } else if constexpr (std::is_same_v<S, Pool1DSpec>) {
          return RunPool1D(layer, spec, stream, in, out);
        } else if constexpr (std::is_same_v<S, GlobalPool1DSpec>) {
          return RunGlobalPool1D(layer, spec, stream, state, in, out);
        } else if constexpr (std::is_same_v<S, FlattenSpec>) {
          auto shape = plan::FlattenShape(layer.name, in.shape);
          if (!shape.ok()) return shape.status();
          return Relabel(stream, in, out, std::move(*shape));
        } else if constexpr (std::is_same_v<S, ReshapeSpec>) {
          auto shape = plan::ReshapeLayerShape(spec, layer.name, in.shape);
          if (!shape.ok()) return shape.status();
          return Relabel(stream, in, out, std::move(*shape));
        } else if constexpr (std::is_same_v<S, RepeatVectorSpec>) {
          return RunRepeatVector(layer, spec, stream, in, out);
        } else if constexpr (std::is_same_v<S, MergeSpec>) {
          return RunMerge(layer, spec, stream, values, out);
        } else {
          return absl::InternalError(
              absl::StrCat("layer '", layer.name, "' has no device form in this engine"));
        }
      },
      layer.spec);
  if (!s.ok()) return s;
  return true;
}

}  // namespace rnnserve::engine::cuda
