#include "engine/cpu/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/tensor_op_kernels.h"

namespace rnnserve::engine {

std::string TensorOpName(TensorOpKind kind) {
  static const char* const kNames[] = {
      "Constant",     "Shape",     "Gather",     "Concat",     "Unsqueeze", "Squeeze",
      "Slice",        "Transpose", "Reshape",    "Expand",     "Cast",      "ConstantOfShape",
      "Add",          "Sub",       "Mul",        "Div",        "Pow",       "Min",
      "Max",          "MatMul",    "Gemm",       "Activation", "Neg",       "Abs",
      "Sqrt",         "Exp",       "Log",        "Reciprocal", "Softmax",   "LogSoftmax",
      "Flatten",      "Split",     "ReduceMean", "ReduceSum",  "ReduceMax", "Range",
      "AttachLengths"};
  switch (kind) {  // the request-lengths ops (engine/lengths_rewrite.h)
    case TensorOpKind::kAttachRequestLengths:
      return "AttachRequestLengths";
    case TensorOpKind::kGatherAtLengths:
      return "GatherAtLengths";
    case TensorOpKind::kZeroPastLengths:
      return "ZeroPastLengths";
    default:
      break;
  }
  const size_t i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

namespace cpu {

using plan::AttachedLengths;
using plan::CheckOperands;
using tensor_ops::Bad;
using tensor_ops::Binary;
using tensor_ops::ByType;
using tensor_ops::Cast;
using tensor_ops::CheckedCount;
using tensor_ops::Concat;
using tensor_ops::CopyStrided;
using tensor_ops::Data;
using tensor_ops::Gather;
using tensor_ops::Gemm;
using tensor_ops::Ints;
using tensor_ops::Make;
using tensor_ops::MatMul;
using tensor_ops::PlanStrided;
using tensor_ops::Range;
using tensor_ops::Reduce;
using tensor_ops::RelabelShape;
using tensor_ops::Softmax;
using tensor_ops::StridedPlan;
using tensor_ops::Unary;

absl::Status EvalTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> in,
                          std::vector<Tensor>* outputs) {
  if (auto s = CheckOperands(spec, in); !s.ok()) return s;
  outputs->clear();
  outputs->emplace_back();
  Tensor* out = &outputs->back();
  const Tensor& x = *in[0];
  switch (spec.kind) {
    case TensorOpKind::kConstant:
    case TensorOpKind::kAttachLengths:
      *out = x;
      return absl::OkStatus();
    case TensorOpKind::kShape: {
      *out = Tensor::Int64({x.rank()}, std::vector<int64_t>(x.shape()));
      return absl::OkStatus();
    }
    case TensorOpKind::kGather:
      return Gather(spec, x, *in[1], out);
    case TensorOpKind::kConcat:
      return Concat(spec, in, out);
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kSqueeze:
    case TensorOpKind::kReshape:
    case TensorOpKind::kFlatten: {
      auto os = RelabelShape(spec, x.shape(), in);
      if (!os.ok()) return os.status();
      *out = x;
      out->Reshape(*os);
      return absl::OkStatus();
    }
    case TensorOpKind::kTranspose:
    case TensorOpKind::kSlice:
    case TensorOpKind::kExpand:
    case TensorOpKind::kSplit: {
      auto plans = PlanStrided(spec, x.shape(), in);
      if (!plans.ok()) return plans.status();
      outputs->clear();
      for (const StridedPlan& p : *plans) outputs->push_back(CopyStrided(x, p));
      return absl::OkStatus();
    }
    case TensorOpKind::kCast:
      return Cast(spec, x, out);
    case TensorOpKind::kConstantOfShape: {
      auto shape = Ints(spec.kind, &x, "shape");
      if (!shape.ok()) return shape.status();
      if (auto c = CheckedCount(spec.kind, *shape); !c.ok()) return c.status();
      // A default-constructed value holds no data: fill with float 0.
      const bool has_value = !spec.value.floats().empty() || !spec.value.ints().empty();
      const DType dtype = has_value ? spec.value.dtype() : DType::kFloat32;
      *out = Make(dtype, *shape);
      if (has_value) {
        ByType(dtype, [&](auto tag) {
          using T = decltype(tag);
          std::fill_n(Data<T>(*out), out->num_elements(), Data<T>(spec.value)[0]);
          return 0;
        });
      }
      return absl::OkStatus();
    }
    case TensorOpKind::kAdd:
    case TensorOpKind::kSub:
    case TensorOpKind::kMul:
    case TensorOpKind::kDiv:
    case TensorOpKind::kMin:
    case TensorOpKind::kMax:
      return Binary(spec, x, *in[1], out);
    case TensorOpKind::kPow: {
      Tensor e;
      if (auto s = Cast({.kind = TensorOpKind::kCast, .to = x.dtype()}, *in[1], &e); !s.ok()) {
        return s;
      }
      return Binary(spec, x, e, out);
    }
    case TensorOpKind::kMatMul:
      return MatMul(spec.kind, x, *in[1], out);
    case TensorOpKind::kGemm:
      return Gemm(spec, x, *in[1], in.size() > 2 ? in[2] : nullptr, out);
    case TensorOpKind::kActivation:
    case TensorOpKind::kNeg:
    case TensorOpKind::kAbs:
    case TensorOpKind::kSqrt:
    case TensorOpKind::kExp:
    case TensorOpKind::kLog:
    case TensorOpKind::kReciprocal:
      return Unary(spec, x, out);
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax:
      return Softmax(spec, x, out);
    case TensorOpKind::kReduceMean:
    case TensorOpKind::kReduceSum:
    case TensorOpKind::kReduceMax:
      return Reduce(spec, x, out);
    case TensorOpKind::kRange:
      return Range(spec, in, out);
    case TensorOpKind::kAttachRequestLengths:
    case TensorOpKind::kGatherAtLengths:
    case TensorOpKind::kZeroPastLengths:
      return EvalLengthsOp(spec, x, {}, out);
  }
  return Bad(spec.kind, "unknown op");
}

absl::Status RunTensorOp(const TensorOpSpec& spec, const Layer& layer, std::vector<Value>* values) {
  if (spec.kind == TensorOpKind::kAttachRequestLengths ||
      spec.kind == TensorOpKind::kGatherAtLengths || spec.kind == TensorOpKind::kZeroPastLengths) {
    return RunLengthsOp(spec, layer, values);
  }
  std::vector<const Tensor*> operands;
  size_t next = 0;
  for (const TensorOperand& op : spec.operands) {
    switch (op.source) {
      case TensorOperand::Source::kInput:
        if (next >= layer.inputs.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer '", layer.name, "' has fewer inputs than operands"));
        }
        operands.push_back(&(*values)[layer.inputs[next++]].tensor);
        break;
      case TensorOperand::Source::kConstant:
        operands.push_back(&op.constant);
        break;
      case TensorOperand::Source::kAbsent:
        operands.push_back(nullptr);
        break;
    }
  }
  std::vector<Tensor> results;
  if (auto s = EvalTensorOp(spec, operands, &results); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "': ", s.message()));
  }
  std::vector<int32_t> lengths;
  if (spec.kind == TensorOpKind::kAttachLengths) {
    auto attached = AttachedLengths(layer.name, operands[0]->shape(), *operands[1]);
    if (!attached.ok()) return attached.status();
    lengths = std::move(*attached);
  }
  if (results.size() < layer.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer.name, "' declares ", layer.outputs.size(), " outputs; ",
                     TensorOpName(spec.kind), " makes ", results.size()));
  }
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    Value& v = (*values)[layer.outputs[i]];
    v.tensor = std::move(results[i]);
    v.lengths = i == 0 ? lengths : std::vector<int32_t>{};
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace rnnserve::engine