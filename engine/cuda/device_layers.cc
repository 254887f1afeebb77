#include "engine/cuda/device_layers.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_pool.h"
#include "engine/cpu/norm_layers.h"
#include "engine/cpu/shape_layers.h"
#include "engine/cpu/tensor_op_kernels.h"
#include "engine/cpu/tensor_ops.h"
#include "engine/cuda/layer_kernels.h"

namespace rnnserve::engine::cuda {
namespace {

namespace tops = cpu::tensor_ops;

static_assert(static_cast<int>(ActivationKind::kExponential) == 15 &&
                  static_cast<int>(ActivationKind::kSoftmax) == 16,
              "device_activation.cuh mirrors ActivationKind's values");

DeviceActivation KernelActivation(const Activation& a) {
  return DeviceActivation{static_cast<int>(a.kind), a.alpha, a.beta};
}

absl::Status Upload(const void* src, size_t bytes, DeviceBuffer* dst, cudaStream_t stream) {
  RNNSERVE_RETURN_IF_ERROR(dst->Reserve(std::max<size_t>(bytes, 1)));
  if (bytes == 0) return absl::OkStatus();
  return CudaOk(cudaMemcpyAsync(dst->get(), src, bytes, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync (layer parameters)");
}

absl::Status UploadFloats(const std::vector<float>& v, DeviceBuffer* dst, cudaStream_t stream) {
  return Upload(v.data(), v.size() * sizeof(float), dst, stream);
}

// The strided view of `dims` with `strides` as a kernel index map; false past the rank limit.
bool ToMap(const Shape& dims, const std::vector<int64_t>& strides, IndexMap* map) {
  if (dims.size() > static_cast<size_t>(kMaxKernelRank)) return false;
  map->rank = static_cast<int>(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    map->dim[a] = dims[a];
    map->stride[a] = strides[a];
  }
  return true;
}

absl::Status CopyOnDevice(const DevValue& in, DevValue* out, cudaStream_t stream) {
  if (in.bytes() == 0) return absl::OkStatus();
  return CudaOk(
      cudaMemcpyAsync(out->dev.get(), in.dev.get(), in.bytes(), cudaMemcpyDeviceToDevice, stream),
      "cudaMemcpyAsync (device copy)");
}

void KeepMask(const DevValue& in, DevValue* out) {
  out->lengths = in.lengths;
  out->step_mask = in.step_mask;
}

void DropMask(DevValue* out) {
  out->lengths.clear();
  out->step_mask.clear();
}

// ---------------------------------------------------------------------------------------------
// Keras layers.

absl::Status RunBatchNorm(const Layer& layer, const BatchNormSpec& spec, cudaStream_t stream,
                          DeviceLayerState& state, DevValue& in, DevValue& out) {
  RNNSERVE_RETURN_IF_ERROR(cpu::CheckBatchNormInput(spec, layer.name, in.dtype, in.shape));
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
  RNNSERVE_RETURN_IF_ERROR(cpu::CheckLayerNormInput(spec, layer.name, in.dtype, in.shape));
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

// Softmax of `out` (already holding the input) over `axis` of `shape`.
absl::Status SoftmaxInPlace(DevValue& out, int axis, bool coerce_2d, bool log, bool double_sum,
                            cudaStream_t stream) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < static_cast<int>(out.shape.size()); ++i) {
    if (i < axis) outer *= out.shape[i];
    if (i == axis) n = out.shape[i];
    if (i > axis) inner *= out.shape[i];
  }
  if (coerce_2d) n *= inner, inner = 1;
  return CudaOk(LaunchSoftmaxAxis(out.dev.as<float>(), outer, n, inner, log, double_sum, stream),
                "softmax kernel");
}

absl::Status RunSoftmax(const Layer& layer, const SoftmaxSpec& spec, cudaStream_t stream,
                        DevValue& in, DevValue& out) {
  auto axis = cpu::SoftmaxAxis(spec, layer.name, in.dtype, in.shape);
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
  RNNSERVE_RETURN_IF_ERROR(cpu::CheckSequence(layer.name, in.dtype, in.shape, spec.in_channels));
  const int64_t B = in.shape[0], T = in.shape[1], Ci = spec.in_channels, Co = spec.out_channels;
  const int64_t K = spec.kernel_size;
  const cpu::Window w = cpu::Conv1DWindow(spec, T);
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
  RNNSERVE_RETURN_IF_ERROR(cpu::CheckSequence(layer.name, in.dtype, in.shape, 0));
  const int64_t B = in.shape[0], T = in.shape[1], C = in.shape[2];
  const cpu::Window w = cpu::PlanWindow(T, spec.pool_size, spec.stride, spec.same_padding, false);
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
  RNNSERVE_RETURN_IF_ERROR(cpu::CheckSequence(layer.name, in.dtype, in.shape, 0));
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
  auto shape = cpu::RepeatVectorShape(spec, layer.name, in.dtype, in.shape);
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

// out [outer, row] gets each input's [outer, chunk] block after the previous ones'.
absl::Status ConcatRows(const std::vector<const float*>& srcs, const std::vector<int64_t>& chunks,
                        int64_t outer, int64_t row, float* dst, cudaStream_t stream) {
  int64_t at = 0;
  for (size_t k = 0; k < srcs.size(); ++k) {
    const int64_t chunk = chunks[k];
    if (chunk > 0 && outer > 0) {
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemcpy2DAsync(dst + at, row * sizeof(float), srcs[k], chunk * sizeof(float),
                                   chunk * sizeof(float), outer, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpy2DAsync (concatenate)"));
    }
    at += chunk;
  }
  return absl::OkStatus();
}

// out = a op b with numpy broadcasting to `shape` (a and b of shape's rank or less); false past
// the rank limit.
absl::StatusOr<bool> BroadcastBinary(const float* a, const Shape& as, const float* b,
                                     const Shape& bs, const Shape& shape, float* out, BinaryOp op,
                                     cudaStream_t stream) {
  IndexMap ma, mb;
  if (!ToMap(shape, tops::BroadcastStrides(as, shape), &ma) ||
      !ToMap(shape, tops::BroadcastStrides(bs, shape), &mb)) {
    return false;
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchBinary(a, ma, b, mb, out, op, stream), "binary kernel"));
  return true;
}

absl::Status RunMerge(const Layer& layer, const MergeSpec& spec, cudaStream_t stream,
                      std::vector<DevValue>& values, DevValue& out) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (int id : layer.inputs) {
    shapes.push_back(values[id].shape);
    dtypes.push_back(values[id].dtype);
  }
  auto shape = cpu::MergeShape(spec, layer.name, shapes, dtypes);
  if (!shape.ok()) return shape.status();
  std::vector<cpu::Value> masks(layer.inputs.size());
  std::vector<const cpu::Value*> mask_ptrs;
  for (size_t k = 0; k < layer.inputs.size(); ++k) {
    DevValue& v = values[layer.inputs[k]];
    RNNSERVE_RETURN_IF_ERROR(ToDevice(&v, stream));
    masks[k].lengths = v.lengths;
    masks[k].step_mask = v.step_mask;
    mask_ptrs.push_back(&masks[k]);
  }
  cpu::Value merged_mask;
  cpu::MergeMasks(mask_ptrs, &merged_mask);
  RNNSERVE_RETURN_IF_ERROR(SetDevice(&out, DType::kFloat32, *shape));
  out.lengths = std::move(merged_mask.lengths);
  out.step_mask = std::move(merged_mask.step_mask);
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

// ---------------------------------------------------------------------------------------------
// Tensor ops.

static_assert(static_cast<int>(TensorOpKind::kMax) - static_cast<int>(TensorOpKind::kAdd) ==
                  static_cast<int>(BinaryOp::kMax) &&
              static_cast<int>(TensorOpKind::kReciprocal) -
                      static_cast<int>(TensorOpKind::kActivation) ==
                  static_cast<int>(UnaryOp::kReciprocal));

// Add, Sub, Mul, Div, Pow, Min, Max: consecutive in TensorOpKind, in BinaryOp's order.
bool IsBinary(TensorOpKind kind) {
  return kind >= TensorOpKind::kAdd && kind <= TensorOpKind::kMax;
}
// Activation, Neg, Abs, Sqrt, Exp, Log, Reciprocal: consecutive, in UnaryOp's order.
bool IsUnary(TensorOpKind kind) {
  return kind >= TensorOpKind::kActivation && kind <= TensorOpKind::kReciprocal;
}

// Operand indices that carry the op's data (the others are INT64 shapes, axes, indices).
std::vector<size_t> DataOperands(const TensorOpSpec& spec) {
  switch (spec.kind) {
    case TensorOpKind::kConcat: {
      std::vector<size_t> all(spec.operands.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      return all;
    }
    case TensorOpKind::kMatMul:
      return {0, 1};
    case TensorOpKind::kGemm:
      return {0, 1, 2};
    default:
      if (IsBinary(spec.kind)) return {0, 1};
      return {0};
  }
}

// The ops this file runs on FP32 data; the others (Shape aside) are INT64 shape arithmetic.
bool HasDeviceForm(TensorOpKind kind) {
  switch (kind) {
    case TensorOpKind::kShape:
    case TensorOpKind::kConstantOfShape:
    case TensorOpKind::kRange:
      return false;
    default:
      return true;
  }
}

const char* DeviceFormOf(TensorOpKind kind) {
  switch (kind) {
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kReshape:
    case TensorOpKind::kFlatten:
    case TensorOpKind::kAttachLengths:
    case TensorOpKind::kCast:
    case TensorOpKind::kConstant:
      return "device copy";
    case TensorOpKind::kTranspose:
    case TensorOpKind::kSlice:
    case TensorOpKind::kExpand:
    case TensorOpKind::kSplit:
      return "strided copy kernel";
    case TensorOpKind::kConcat:
      return "cudaMemcpy2DAsync per operand";
    case TensorOpKind::kGather:
      return "gather kernel";
    case TensorOpKind::kMatMul:
    case TensorOpKind::kGemm:
      return "cuBLAS SGEMM";
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax:
      return "softmax kernel";
    case TensorOpKind::kReduceMean:
    case TensorOpKind::kReduceSum:
    case TensorOpKind::kReduceMax:
      return "reduction kernel";
    default:
      return "elementwise kernel";
  }
}

// A data operand on the device.
struct DataOperand {
  const float* ptr = nullptr;
  Shape shape;
};

class TensorOpRunner {
 public:
  TensorOpRunner(const Layer& layer, const TensorOpSpec& spec, cudaStream_t stream,
                 cublasHandle_t cublas, DeviceLayerState& state, std::vector<DevValue>& values)
      : layer_(layer),
        spec_(spec),
        stream_(stream),
        cublas_(cublas),
        state_(state),
        values_(values) {}

  absl::StatusOr<bool> Run();

 private:
  absl::Status Bad(const absl::Status& s) const {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer_.name, "': ", s.message()));
  }
  // Output i as an FP32 device value of `shape`, without a mask; null when the layer declares
  // fewer outputs (the op's other results are not wanted).
  absl::StatusOr<DevValue*> Output(size_t i, const Shape& shape);
  absl::StatusOr<bool> Binary();
  absl::StatusOr<bool> Unary();
  absl::StatusOr<bool> Strided();
  absl::StatusOr<bool> MatMul();
  absl::StatusOr<bool> Gemm();
  absl::StatusOr<bool> Reduce();

  const Layer& layer_;
  const TensorOpSpec& spec_;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  DeviceLayerState& state_;
  std::vector<DevValue>& values_;
  // Per operand: the tensor the CPU's planning reads (a placeholder for device data), the
  // model value (null for constants and absent operands), the device data.
  std::vector<const Tensor*> host_;
  std::vector<DevValue*> value_;
  std::vector<DataOperand> data_;
};

const Tensor& OnDevicePlaceholder() {
  static const Tensor* const kPlaceholder = new Tensor();
  return *kPlaceholder;
}

absl::StatusOr<DevValue*> TensorOpRunner::Output(size_t i, const Shape& shape) {
  if (i >= layer_.outputs.size()) return nullptr;
  DevValue* out = &values_[layer_.outputs[i]];
  RNNSERVE_RETURN_IF_ERROR(SetDevice(out, DType::kFloat32, shape));
  DropMask(out);
  return out;
}

absl::StatusOr<bool> TensorOpRunner::Run() {
  const size_t n = spec_.operands.size();
  host_.assign(n, nullptr);
  value_.assign(n, nullptr);
  data_.assign(n, DataOperand{});
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    const TensorOperand& op = spec_.operands[i];
    if (op.source == TensorOperand::Source::kInput) {
      if (next >= layer_.inputs.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer_.name, "' has fewer inputs than operands"));
      }
      value_[i] = &values_[layer_.inputs[next++]];
    } else if (op.source == TensorOperand::Source::kConstant) {
      host_[i] = &op.constant;
    }
  }
  if (spec_.kind == TensorOpKind::kShape) {  // reads the shape only, wherever the data is
    if (n == 0 || (value_[0] == nullptr && host_[0] == nullptr)) return false;
    if (layer_.outputs.empty()) return true;
    const Shape& s = value_[0] != nullptr ? value_[0]->shape : host_[0]->shape();
    DevValue& out = values_[layer_.outputs[0]];
    out.input = nullptr;
    out.host = Tensor::Int64({static_cast<int64_t>(s.size())}, std::vector<int64_t>(s));
    out.dtype = DType::kInt64;
    out.shape = out.host.shape();
    out.host_valid = true;
    out.dev_valid = false;
    DropMask(&out);
    return true;
  }
  // Data operands: FP32 on the device, else the op is INT64 shape arithmetic for the host.
  for (size_t i : DataOperands(spec_)) {
    if (i >= n) continue;
    const DType dtype = value_[i] != nullptr  ? value_[i]->dtype
                        : host_[i] != nullptr ? host_[i]->dtype()
                                              : DType::kFloat32;
    if (dtype != DType::kFloat32) return false;
  }
  if (spec_.kind == TensorOpKind::kCast && spec_.to != DType::kFloat32) return false;
  for (size_t i : DataOperands(spec_)) {
    if (i >= n || (value_[i] == nullptr && host_[i] == nullptr)) continue;
    if (value_[i] != nullptr) {
      RNNSERVE_RETURN_IF_ERROR(ToDevice(value_[i], stream_));
      data_[i] = {value_[i]->dev.as<float>(), value_[i]->shape};
    } else {
      data_[i] = {state_.constants.at(i).as<float>(), host_[i]->shape()};
    }
    host_[i] = &OnDevicePlaceholder();
  }
  for (size_t i = 0; i < n; ++i) {
    if (value_[i] != nullptr && host_[i] == nullptr) {  // an INT64 operand: on the host
      RNNSERVE_RETURN_IF_ERROR(ToHost(value_[i], stream_));
      host_[i] = &value_[i]->host_tensor();
    }
  }
  if (auto s = cpu::CheckOperands(spec_, host_); !s.ok()) return Bad(s);
  if (IsBinary(spec_.kind)) return Binary();
  if (IsUnary(spec_.kind)) return Unary();
  const DataOperand& x = data_[0];
  const int64_t count = NumElements(x.shape);

  switch (spec_.kind) {
    case TensorOpKind::kConstant:
    case TensorOpKind::kCast:
    case TensorOpKind::kAttachLengths:
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kReshape:
    case TensorOpKind::kFlatten: {
      Shape shape = x.shape;
      std::vector<int32_t> lengths;
      if (spec_.kind == TensorOpKind::kAttachLengths) {
        auto attached = cpu::AttachedLengths(layer_.name, x.shape, *host_[1]);
        if (!attached.ok()) return attached.status();
        lengths = std::move(*attached);
      } else if (spec_.kind != TensorOpKind::kConstant && spec_.kind != TensorOpKind::kCast) {
        auto relabelled = tops::RelabelShape(spec_, x.shape, host_);
        if (!relabelled.ok()) return Bad(relabelled.status());
        shape = std::move(*relabelled);
      }
      auto out = Output(0, shape);
      if (!out.ok()) return out.status();
      if (*out == nullptr) return true;
      (*out)->lengths = std::move(lengths);
      if (count > 0) {
        RNNSERVE_RETURN_IF_ERROR(
            CudaOk(cudaMemcpyAsync((*out)->dev.get(), x.ptr, count * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync (tensor op)"));
      }
      return true;
    }
    case TensorOpKind::kTranspose:
    case TensorOpKind::kSlice:
    case TensorOpKind::kExpand:
    case TensorOpKind::kSplit:
      return Strided();
    case TensorOpKind::kGather: {
      auto plan = tops::PlanGather(spec_, x.shape, *host_[1]);
      if (!plan.ok()) return Bad(plan.status());
      auto out = Output(0, plan->shape);
      if (!out.ok()) return out.status();
      if (*out == nullptr) return true;
      RNNSERVE_RETURN_IF_ERROR(Upload(plan->indices.data(), plan->indices.size() * sizeof(int64_t),
                                      &state_.scratch, stream_));
      RNNSERVE_RETURN_IF_ERROR(CudaOk(
          LaunchGather(x.ptr, state_.scratch.as<int64_t>(), (*out)->dev.as<float>(), plan->outer,
                       plan->n, static_cast<int64_t>(plan->indices.size()), plan->inner, stream_),
          "gather kernel"));
      return true;
    }
    case TensorOpKind::kConcat: {
      std::vector<Shape> shapes;
      std::vector<DType> dtypes;
      std::vector<const float*> srcs;
      for (const DataOperand& d : data_) {
        if (d.ptr == nullptr && d.shape.empty()) continue;
        shapes.push_back(d.shape);
        dtypes.push_back(DType::kFloat32);
        srcs.push_back(d.ptr);
      }
      auto plan = tops::PlanConcat(spec_, shapes, dtypes);
      if (!plan.ok()) return Bad(plan.status());
      auto out = Output(0, plan->shape);
      if (!out.ok()) return out.status();
      if (*out == nullptr) return true;
      std::vector<int64_t> chunks;
      for (const Shape& s : shapes) {
        chunks.push_back(NumElements(s) / std::max<int64_t>(plan->outer, 1));
      }
      RNNSERVE_RETURN_IF_ERROR(
          ConcatRows(srcs, chunks, plan->outer, plan->row, (*out)->dev.as<float>(), stream_));
      return true;
    }
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax: {
      if (x.shape.empty()) return Bad(tops::Bad(spec_.kind, "expects floats"));
      auto axis = tops::Axis(spec_.kind, spec_.axis, static_cast<int>(x.shape.size()));
      if (!axis.ok()) return Bad(axis.status());
      auto out = Output(0, x.shape);
      if (!out.ok()) return out.status();
      if (*out == nullptr) return true;
      if (count > 0) {
        RNNSERVE_RETURN_IF_ERROR(
            CudaOk(cudaMemcpyAsync((*out)->dev.get(), x.ptr, count * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync (softmax)"));
      }
      RNNSERVE_RETURN_IF_ERROR(SoftmaxInPlace(**out, *axis, spec_.coerce_2d,
                                              spec_.kind == TensorOpKind::kLogSoftmax,
                                              /*double_sum=*/true, stream_));
      return true;
    }
    case TensorOpKind::kMatMul:
      return MatMul();
    case TensorOpKind::kGemm:
      return Gemm();
    case TensorOpKind::kReduceMean:
    case TensorOpKind::kReduceSum:
    case TensorOpKind::kReduceMax:
      return Reduce();
    default:
      return false;
  }
}

absl::StatusOr<bool> TensorOpRunner::Binary() {
  const DataOperand& x = data_[0];
  auto shape = tops::Broadcast(spec_.kind, x.shape, data_[1].shape);
  if (!shape.ok()) return Bad(shape.status());
  if (auto c = tops::CheckedCount(spec_.kind, *shape); !c.ok()) return Bad(c.status());
  if (shape->size() > static_cast<size_t>(kMaxKernelRank)) return false;
  auto out = Output(0, *shape);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  const BinaryOp op =
      static_cast<BinaryOp>(static_cast<int>(spec_.kind) - static_cast<int>(TensorOpKind::kAdd));
  return BroadcastBinary(x.ptr, x.shape, data_[1].ptr, data_[1].shape, *shape,
                         (*out)->dev.as<float>(), op, stream_);
}

absl::StatusOr<bool> TensorOpRunner::Unary() {
  const DataOperand& x = data_[0];
  if (spec_.kind == TensorOpKind::kActivation &&
      spec_.activation.kind == ActivationKind::kSoftmax) {
    return false;
  }
  auto out = Output(0, x.shape);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  const UnaryOp op = static_cast<UnaryOp>(static_cast<int>(spec_.kind) -
                                          static_cast<int>(TensorOpKind::kActivation));
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(LaunchUnary(x.ptr, (*out)->dev.as<float>(), NumElements(x.shape), op,
                         KernelActivation(spec_.activation), 0.0f, stream_),
             "elementwise kernel"));
  return true;
}

absl::StatusOr<bool> TensorOpRunner::Strided() {
  const DataOperand& x = data_[0];
  auto plans = tops::PlanStrided(spec_, x.shape, host_);
  if (!plans.ok()) return Bad(plans.status());
  if (plans->size() < layer_.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer_.name, "' declares ", layer_.outputs.size(), " outputs; ",
                     TensorOpName(spec_.kind), " makes ", plans->size()));
  }
  for (const cpu::tensor_ops::StridedPlan& p : *plans) {
    if (p.shape.size() > static_cast<size_t>(kMaxKernelRank)) return false;
  }
  for (size_t i = 0; i < layer_.outputs.size(); ++i) {
    const cpu::tensor_ops::StridedPlan& p = (*plans)[i];
    auto out = Output(i, p.shape);
    if (!out.ok()) return out.status();
    IndexMap map;
    ToMap(p.shape, p.strides, &map);
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchStridedCopy(x.ptr, p.offset, map, (*out)->dev.as<float>(), stream_),
               "strided copy kernel"));
  }
  return true;
}

// [..., M, K] x [..., K, N] where each side's batch axes are either the whole broadcast batch
// or absent (all 1): one SGEMM, or one strided-batched SGEMM. Other broadcasts and 1-D
// operands: the host.
absl::StatusOr<bool> TensorOpRunner::MatMul() {
  const DataOperand& a = data_[0];
  const DataOperand& b = data_[1];
  auto plan = tops::PlanMatMul(spec_.kind, a.shape, b.shape);
  if (!plan.ok()) return Bad(plan.status());
  const int64_t M = plan->M, K = plan->K, N = plan->N;
  const int64_t nb = NumElements(plan->batch), na = NumElements(plan->abatch),
                nbb = NumElements(plan->bbatch);
  if (plan->a_vector || plan->b_vector || (na != nb && na != 1) || (nbb != nb && nbb != 1)) {
    return false;
  }
  auto out = Output(0, plan->out);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  float* y = (*out)->dev.as<float>();
  if (nb == 0 || M == 0 || N == 0) return true;
  if (K == 0) {
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemsetAsync(y, 0, nb * M * N * sizeof(float), stream_),
                                    "cudaMemsetAsync (MatMul)"));
    return true;
  }
  if (nbb == 1 && na == nb) {  // one B for every batch: a single GEMM over all rows of A
    RNNSERVE_RETURN_IF_ERROR(
        RowMajorGemm(cublas_, a.ptr, b.ptr, y, nb * M, K, N, "cublasSgemm (MatMul)"));
    return true;
  }
  // Column-major, as RowMajorGemm: Y^T = B^T . A^T per batch; a side without batch axes is
  // read again by every batch (stride 0).
  const float one = 1.0f, zero = 0.0f;
  RNNSERVE_RETURN_IF_ERROR(
      CublasOk(cublasSgemmStridedBatched(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N),
                                         static_cast<int>(M), static_cast<int>(K), &one, b.ptr,
                                         static_cast<int>(N), nbb == 1 ? 0 : K * N, a.ptr,
                                         static_cast<int>(K), na == 1 ? 0 : M * K, &zero, y,
                                         static_cast<int>(N), M * N, static_cast<int>(nb)),
               "cublasSgemmStridedBatched (MatMul)"));
  return true;
}

// alpha * A' B' + beta * C: C broadcast into the output first, then one SGEMM accumulates.
absl::StatusOr<bool> TensorOpRunner::Gemm() {
  const DataOperand& a = data_[0];
  const DataOperand& b = data_[1];
  const bool has_c = data_.size() > 2 && data_[2].ptr != nullptr;
  auto plan = tops::PlanGemm(spec_, a.shape, b.shape, has_c ? &data_[2].shape : nullptr);
  if (!plan.ok()) return Bad(plan.status());
  const int64_t M = plan->M, K = plan->K, N = plan->N;
  if (K == 0) return false;  // an empty product: the host's plain loops
  const Shape mn = {M, N};
  auto out = Output(0, mn);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  float* y = (*out)->dev.as<float>();
  if (M == 0 || N == 0) return true;
  if (has_c) {
    IndexMap map;
    ToMap(mn, tops::BroadcastStrides(data_[2].shape, mn), &map);
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(LaunchStridedCopy(data_[2].ptr, 0, map, y, stream_), "strided copy kernel"));
  }
  const float alpha = spec_.alpha, beta = has_c ? spec_.beta : 0.0f;
  RNNSERVE_RETURN_IF_ERROR(
      CublasOk(cublasSgemm(cublas_, spec_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           spec_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                           static_cast<int>(M), static_cast<int>(K), &alpha, b.ptr,
                           static_cast<int>(spec_.trans_b ? K : N), a.ptr,
                           static_cast<int>(spec_.trans_a ? M : K), &beta, y, static_cast<int>(N)),
               "cublasSgemm (Gemm)"));
  return true;
}

absl::StatusOr<bool> TensorOpRunner::Reduce() {
  const DataOperand& x = data_[0];
  const int rank = static_cast<int>(x.shape.size());
  if (rank > kMaxKernelRank) return false;
  auto plan = tops::PlanReduce(spec_, x.shape);
  if (!plan.ok()) return Bad(plan.status());
  // The output walks the kept axes, each output element the reduced ones.
  const auto strides = tops::Strides(x.shape);
  Shape kept_dims, red_dims;
  std::vector<int64_t> kept_strides, red_strides;
  for (int i = 0; i < rank; ++i) {
    (plan->reduced[i] ? red_dims : kept_dims).push_back(x.shape[i]);
    (plan->reduced[i] ? red_strides : kept_strides).push_back(strides[i]);
  }
  auto out = Output(0, plan->out);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  IndexMap kept, reduced;
  ToMap(kept_dims, kept_strides, &kept);
  ToMap(red_dims, red_strides, &reduced);
  const ReduceOp op = spec_.kind == TensorOpKind::kReduceMax    ? ReduceOp::kMax
                      : spec_.kind == TensorOpKind::kReduceMean ? ReduceOp::kMean
                                                                : ReduceOp::kSum;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(LaunchReduce(x.ptr, kept, reduced, plan->count, (*out)->dev.as<float>(), op, stream_),
             "reduction kernel"));
  return true;
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
          RNNSERVE_RETURN_IF_ERROR(cpu::ValidateBatchNorm(spec, layer.name));
          std::vector<float> scale, shift;
          cpu::FoldBatchNorm(spec, &scale, &shift);
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(scale, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(shift, &state->params_b, stream));
          return DevicePlacement{true, "scale/shift kernel (moving statistics folded at load)"};
        } else if constexpr (std::is_same_v<S, LayerNormSpec>) {
          RNNSERVE_RETURN_IF_ERROR(cpu::ValidateLayerNorm(spec, layer.name));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.gamma, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.beta, &state->params_b, stream));
          return DevicePlacement{true, "layer normalisation kernel (a block per row, double sums)"};
        } else if constexpr (std::is_same_v<S, SoftmaxSpec>) {
          return DevicePlacement{true, absl::StrCat("softmax kernel over axis ", spec.axis)};
        } else if constexpr (std::is_same_v<S, Conv1DSpec>) {
          RNNSERVE_RETURN_IF_ERROR(cpu::ValidateConv1D(spec, layer.name));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.kernel, &state->params_a, stream));
          RNNSERVE_RETURN_IF_ERROR(UploadFloats(spec.bias, &state->params_b, stream));
          return DevicePlacement{true,
                                 "im2col kernel + cuBLAS SGEMM + bias/activation kernel, FP32"};
        } else if constexpr (std::is_same_v<S, Pool1DSpec>) {
          RNNSERVE_RETURN_IF_ERROR(cpu::ValidatePool1D(spec, layer.name));
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
          if (spec.kind == TensorOpKind::kShape) {
            return DevicePlacement{true, "reads only its operand's shape: no data moves"};
          }
          if (!HasDeviceForm(spec.kind)) {
            return DevicePlacement{false, "host: shape arithmetic on INT64 tensors"};
          }
          state->constants.resize(spec.operands.size());
          for (size_t i = 0; i < spec.operands.size(); ++i) {
            const TensorOperand& op = spec.operands[i];
            if (op.source == TensorOperand::Source::kConstant &&
                op.constant.dtype() == DType::kFloat32) {
              RNNSERVE_RETURN_IF_ERROR(Upload(op.constant.f32(),
                                              op.constant.num_elements() * sizeof(float),
                                              &state->constants[i], stream));
            }
          }
          return DevicePlacement{true,
                                 absl::StrCat(DeviceFormOf(spec.kind),
                                              " on FP32 data; over INT64 shape tensors, the host")};
        } else {
          return DevicePlacement{false, host};
        }
      },
      layer.spec);
}

absl::StatusOr<bool> RunDeviceLayer(const Layer& layer, cudaStream_t stream, cublasHandle_t cublas,
                                    DeviceLayerState& state, std::vector<DevValue>& values) {
  if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec)) {
    return TensorOpRunner(layer, *op, stream, cublas, state, values).Run();
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
          auto shape = cpu::FlattenShape(layer.name, in.shape);
          if (!shape.ok()) return shape.status();
          return Relabel(stream, in, out, std::move(*shape));
        } else if constexpr (std::is_same_v<S, ReshapeSpec>) {
          auto shape = cpu::ReshapeLayerShape(spec, layer.name, in.shape);
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
