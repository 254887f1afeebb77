// The tensor-op runner: resolves a TensorOpSpec's operands (device data, host INT64 tensors,
// uploaded constants), plans with the CPU engine's shape plans, and launches the kernels.

#include "engine/cuda/device_tensor_ops.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_layer_util.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::cuda {
namespace {

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
    // The compiled model runs these itself (cuda_model_lengths.cc), with the batch's lengths.
    case TensorOpKind::kGatherAtLengths:
    case TensorOpKind::kZeroPastLengths:
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
    case TensorOpKind::kAttachRequestLengths:
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
  // Sorts the operands into model values, host constants and absent ones.
  absl::Status BindOperands();
  // Moves FP32 data operands to the device and INT64 ones to the host; false when the op's data
  // is INT64 (or a Cast leaves FP32), so the host runs it.
  absl::StatusOr<bool> PlaceOperands();
  absl::StatusOr<bool> ShapeOf();
  absl::StatusOr<bool> Copy();
  absl::StatusOr<bool> Gather();
  absl::StatusOr<bool> Concat();
  absl::StatusOr<bool> Softmax();
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
  RNNSERVE_RETURN_IF_ERROR(BindOperands());
  if (spec_.kind == TensorOpKind::kShape) return ShapeOf();
  auto on_device = PlaceOperands();
  if (!on_device.ok() || !*on_device) return on_device;
  if (auto s = engine::plan::CheckOperands(spec_, host_); !s.ok()) return Bad(s);
  if (IsBinary(spec_.kind)) return Binary();
  if (IsUnary(spec_.kind)) return Unary();
  switch (spec_.kind) {
    case TensorOpKind::kConstant:
    case TensorOpKind::kCast:
    case TensorOpKind::kAttachLengths:
    case TensorOpKind::kAttachRequestLengths:
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kReshape:
    case TensorOpKind::kFlatten:
      return Copy();
    case TensorOpKind::kTranspose:
    case TensorOpKind::kSlice:
    case TensorOpKind::kExpand:
    case TensorOpKind::kSplit:
      return Strided();
    case TensorOpKind::kGather:
      return Gather();
    case TensorOpKind::kConcat:
      return Concat();
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax:
      return Softmax();
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

absl::Status TensorOpRunner::BindOperands() {
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
  return absl::OkStatus();
}

absl::StatusOr<bool> TensorOpRunner::ShapeOf() {  // reads the shape only, wherever the data is
  if (value_.empty() || (value_[0] == nullptr && host_[0] == nullptr)) return false;
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

absl::StatusOr<bool> TensorOpRunner::PlaceOperands() {
  const size_t n = spec_.operands.size();
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
  return true;
}

// Constant, Cast, AttachLengths and the ops that relabel the shape: a device copy.
absl::StatusOr<bool> TensorOpRunner::Copy() {
  const DataOperand& x = data_[0];
  const int64_t count = NumElements(x.shape);
  Shape shape = x.shape;
  std::vector<int32_t> lengths;
  if (spec_.kind == TensorOpKind::kAttachLengths) {
    auto attached = engine::plan::AttachedLengths(layer_.name, x.shape, *host_[1]);
    if (!attached.ok()) return attached.status();
    lengths = std::move(*attached);
  } else if (spec_.kind == TensorOpKind::kAttachRequestLengths) {
    // The shorter, per sequence, of the lengths operand 0 carries and the request's (those
    // beside operand 1, a sequence model input), as engine/cpu/lengths_ops.cc.
    const std::vector<int32_t>& own = value_[0]->lengths;
    const std::vector<int32_t>& request = value_[1]->lengths;
    lengths = own.empty() ? request : own;
    if (!own.empty() && !request.empty()) {
      if (own.size() != request.size()) {
        return Bad(absl::InvalidArgumentError("the request's lengths do not match the batch"));
      }
      for (size_t b = 0; b < own.size(); ++b) lengths[b] = std::min(own[b], request[b]);
    }
    if (!lengths.empty() &&
        (x.shape.size() < 2 || static_cast<int64_t>(lengths.size()) != x.shape[0] ||
         *std::max_element(lengths.begin(), lengths.end()) > x.shape[1])) {
      return Bad(absl::InvalidArgumentError("the lengths do not fit its input"));
    }
  } else if (spec_.kind != TensorOpKind::kConstant && spec_.kind != TensorOpKind::kCast) {
    auto relabelled = engine::plan::RelabelShape(spec_, x.shape, host_);
    if (!relabelled.ok()) return Bad(relabelled.status());
    shape = std::move(*relabelled);
  }
  auto out = Output(0, shape);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  (*out)->lengths = std::move(lengths);
  if (count > 0) {
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync((*out)->dev.get(), x.ptr, count * sizeof(float),
                                                    cudaMemcpyDeviceToDevice, stream_),
                                    "cudaMemcpyAsync (tensor op)"));
  }
  return true;
}

absl::StatusOr<bool> TensorOpRunner::Gather() {
  const DataOperand& x = data_[0];
  auto plan = engine::plan::PlanGather(spec_, x.shape, *host_[1]);
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

absl::StatusOr<bool> TensorOpRunner::Concat() {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<const float*> srcs;
  for (const DataOperand& d : data_) {
    if (d.ptr == nullptr && d.shape.empty()) continue;
    shapes.push_back(d.shape);
    dtypes.push_back(DType::kFloat32);
    srcs.push_back(d.ptr);
  }
  auto plan = engine::plan::PlanConcat(spec_, shapes, dtypes);
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

absl::StatusOr<bool> TensorOpRunner::Softmax() {
  const DataOperand& x = data_[0];
  const int64_t count = NumElements(x.shape);
  if (x.shape.empty()) return Bad(engine::plan::Bad(spec_.kind, "expects floats"));
  auto axis = engine::plan::Axis(spec_.kind, spec_.axis, static_cast<int>(x.shape.size()));
  if (!axis.ok()) return Bad(axis.status());
  auto out = Output(0, x.shape);
  if (!out.ok()) return out.status();
  if (*out == nullptr) return true;
  if (count > 0) {
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync((*out)->dev.get(), x.ptr, count * sizeof(float),
                                                    cudaMemcpyDeviceToDevice, stream_),
                                    "cudaMemcpyAsync (softmax)"));
  }
  RNNSERVE_RETURN_IF_ERROR(SoftmaxInPlace(**out, *axis, spec_.coerce_2d,
                                          spec_.kind == TensorOpKind::kLogSoftmax,
                                          /*double_sum=*/true, stream_));
  return true;
}

absl::StatusOr<bool> TensorOpRunner::Binary() {
  const DataOperand& x = data_[0];
  auto shape = engine::plan::Broadcast(spec_.kind, x.shape, data_[1].shape);
  if (!shape.ok()) return Bad(shape.status());
  if (auto c = engine::plan::CheckedCount(spec_.kind, *shape); !c.ok()) return Bad(c.status());
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
  auto plans = engine::plan::PlanStrided(spec_, x.shape, host_);
  if (!plans.ok()) return Bad(plans.status());
  if (plans->size() < layer_.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer_.name, "' declares ", layer_.outputs.size(), " outputs; ",
                     TensorOpName(spec_.kind), " makes ", plans->size()));
  }
  for (const engine::plan::StridedPlan& p : *plans) {
    if (p.shape.size() > static_cast<size_t>(kMaxKernelRank)) return false;
  }
  for (size_t i = 0; i < layer_.outputs.size(); ++i) {
    const engine::plan::StridedPlan& p = (*plans)[i];
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
  auto plan = engine::plan::PlanMatMul(spec_.kind, a.shape, b.shape);
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
  auto plan = engine::plan::PlanGemm(spec_, a.shape, b.shape, has_c ? &data_[2].shape : nullptr);
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
    ToMap(mn, engine::plan::BroadcastStrides(data_[2].shape, mn), &map);
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
  auto plan = engine::plan::PlanReduce(spec_, x.shape);
  if (!plan.ok()) return Bad(plan.status());
  // The output walks the kept axes, each output element the reduced ones.
  const auto strides = engine::plan::Strides(x.shape);
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

absl::StatusOr<DevicePlacement> PlanDeviceTensorOp(const TensorOpSpec& spec, cudaStream_t stream,
                                                   DeviceLayerState* state) {
  if (spec.kind == TensorOpKind::kShape) {
    return DevicePlacement{true, "reads only its operand's shape: no data moves"};
  }
  if (!HasDeviceForm(spec.kind)) {
    return DevicePlacement{false, "host: shape arithmetic on INT64 tensors"};
  }
  state->constants.resize(spec.operands.size());
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    const TensorOperand& op = spec.operands[i];
    if (op.source == TensorOperand::Source::kConstant && op.constant.dtype() == DType::kFloat32) {
      RNNSERVE_RETURN_IF_ERROR(Upload(op.constant.f32(), op.constant.num_elements() * sizeof(float),
                                      &state->constants[i], stream));
    }
  }
  return DevicePlacement{true, absl::StrCat(DeviceFormOf(spec.kind),
                                            " on FP32 data; over INT64 shape tensors, the host")};
}

absl::StatusOr<bool> RunDeviceTensorOp(const Layer& layer, const TensorOpSpec& spec,
                                       cudaStream_t stream, cublasHandle_t cublas,
                                       DeviceLayerState& state, std::vector<DevValue>& values) {
  return TensorOpRunner(layer, spec, stream, cublas, state, values).Run();
}

}  // namespace rnnserve::engine::cuda
