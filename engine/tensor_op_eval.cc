#include "engine/tensor_op_eval.h"

#include <algorithm>

#include "engine/ops/lengths_ops.h"
#include "engine/ops/tensor_op_kernels.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine {

int TensorOpOutputCount(const TensorOpSpec& spec) { return plan::TensorOpOutputs(spec); }

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

absl::Status EvaluateTensorOp(const TensorOpSpec& spec, absl::Span<const Tensor* const> in,
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

}  // namespace rnnserve::engine
