// Non-recurrent ONNX ops -> generic tensor ops (engine/cpu/tensor_ops.h) or Dense layers.
// Older opsets' attribute forms (Squeeze/Unsqueeze/Split/Slice/Reduce axes as attributes,
// Softmax's 2-D coercion before opset 13, Clip's attributes before opset 11) map onto the same
// ops.

#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/onnx/onnx_graph.h"
#include "models/onnx/onnx_tensor.h"

namespace rnnserve::models::onnx {
namespace {

using engine::Activation;
using engine::ActivationKind;
using engine::DType;
using engine::Tensor;
using engine::TensorOpKind;
using engine::TensorOpSpec;

struct Ctx {
  const NodeProto& node;
  const NodeAttributes& attrs;
  GraphBuilder* b;
  std::vector<Ref> in;  // resolved inputs, absent ones included
};

absl::Status BindOutputs(Ctx& c, std::vector<Ref> outs) {
  for (int i = 0; i < c.node.output_size(); ++i) {
    if (c.node.output(i).empty()) continue;
    if (i >= static_cast<int>(outs.size())) {
      return absl::InvalidArgumentError(absl::StrCat("output ", i, " is not supported"));
    }
    if (auto s = c.b->Bind(c.node.output(i), std::move(outs[i])); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EmitOp(Ctx& c, TensorOpSpec spec, std::vector<Ref> operands) {
  auto outs = c.b->Emit(std::move(spec), operands, c.node.name(), "onnx::" + c.node.op_type());
  if (!outs.ok()) return outs.status();
  return BindOutputs(c, std::move(*outs));
}

Ref Input(const Ctx& c, size_t i) { return i < c.in.size() ? c.in[i] : Ref{.absent = true}; }

Ref IntsRef(const std::vector<int64_t>& v) {
  return Ref{.constant = Tensor::Int64({static_cast<int64_t>(v.size())}, v)};
}

// Ops whose axes moved from an attribute to an input at `since` (Squeeze, Unsqueeze, Split,
// ReduceSum at 13, Reduce* at 18).
Ref AxesOperand(const Ctx& c, int since, const char* attr, size_t input) {
  if (c.b->opset() >= since) return Input(c, input);
  if (!c.attrs.Has(attr)) return Ref{.absent = true};
  return IntsRef(c.attrs.Ints(attr));
}

absl::StatusOr<std::vector<int64_t>> ConstantInts(const Ref& r, const char* what) {
  if (r.absent) return std::vector<int64_t>{};
  if (!r.is_constant() || r.constant.dtype() != DType::kInt64) {
    return absl::UnimplementedError(absl::StrCat(what, " must be a constant integer tensor here"));
  }
  return std::vector<int64_t>(r.constant.ints().begin(), r.constant.ints().end());
}

absl::Status Unary(Ctx& c, TensorOpKind kind) { return EmitOp(c, {.kind = kind}, {Input(c, 0)}); }

absl::Status Act(Ctx& c, ActivationKind kind, float alpha = 0.0f, float beta = 0.0f) {
  return EmitOp(
      c, {.kind = TensorOpKind::kActivation, .activation = Activation::Of(kind, alpha, beta)},
      {Input(c, 0)});
}

// MatMul / Gemm with a constant 2-D weight become a Dense layer over the last axis.
absl::Status DenseOrGeneric(Ctx& c, bool gemm) {
  const Ref a = Input(c, 0), w = Input(c, 1), bias = Input(c, 2);
  const float alpha = c.attrs.Float("alpha", 1.0f), beta = c.attrs.Float("beta", 1.0f);
  const bool ta = gemm && c.attrs.Int("transA", 0) != 0;
  const bool tb = gemm && c.attrs.Int("transB", 0) != 0;
  const bool dense_ok = !a.is_constant() && !a.absent && w.is_constant() &&
                        w.constant.rank() == 2 && w.constant.dtype() == DType::kFloat32 && !ta;
  const int64_t n_out = dense_ok ? w.constant.dim(tb ? 0 : 1) : 0;
  const bool bias_ok =
      !gemm || bias.absent ||
      (bias.is_constant() && bias.constant.dtype() == DType::kFloat32 &&
       bias.constant.num_elements() == n_out &&
       (bias.constant.rank() == 1 || (bias.constant.rank() == 2 && bias.constant.dim(0) == 1)));
  if (!dense_ok || !bias_ok) {
    if (!gemm) return EmitOp(c, {.kind = TensorOpKind::kMatMul}, {a, w});
    return EmitOp(
        c,
        {.kind = TensorOpKind::kGemm, .trans_a = ta, .trans_b = tb, .alpha = alpha, .beta = beta},
        {a, w, bias});
  }
  const Tensor& W = w.constant;
  engine::DenseSpec dense;
  dense.in = static_cast<int>(W.dim(tb ? 1 : 0));
  dense.out = static_cast<int>(n_out);
  dense.kernel.resize(W.num_elements());  // [in, out]
  for (int64_t i = 0; i < dense.in; ++i) {
    for (int64_t o = 0; o < dense.out; ++o) {
      const float v = tb ? W.f32()[o * dense.in + i] : W.f32()[i * dense.out + o];
      dense.kernel[i * dense.out + o] = alpha * v;
    }
  }
  if (gemm && !bias.absent) {
    for (float v : bias.constant.floats()) dense.bias.push_back(beta * v);
  }
  const int id = c.b->NewValue();
  engine::Layer layer = NewLayer(c.node.name(), "onnx::" + c.node.op_type());
  layer.spec = std::move(dense);
  layer.inputs = {a.id};
  layer.outputs = {id};
  c.b->AddLayer(std::move(layer));
  return BindOutputs(c, {Ref{.id = id}});
}

absl::Status Constant(Ctx& c) {
  const std::string what = absl::StrCat(NodeLabel(c.node), " value");
  if (const TensorProto* t = c.attrs.Tensor("value")) {
    auto v = TensorFromProto(*t, what);
    if (!v.ok()) return v.status();
    return BindOutputs(c, {Ref{.constant = std::move(*v)}});
  }
  if (c.attrs.Has("value_float")) {
    return BindOutputs(c, {Ref{.constant = Tensor::Float({}, {c.attrs.Float("value_float", 0)})}});
  }
  if (c.attrs.Has("value_floats")) {
    auto f = c.attrs.Floats("value_floats");
    return BindOutputs(c, {Ref{.constant = Tensor::Float({static_cast<int64_t>(f.size())}, f)}});
  }
  if (c.attrs.Has("value_int")) {
    return BindOutputs(c, {Ref{.constant = Tensor::Int64({}, {c.attrs.Int("value_int", 0)})}});
  }
  if (c.attrs.Has("value_ints")) {
    return BindOutputs(c, {IntsRef(c.attrs.Ints("value_ints"))});
  }
  return absl::UnimplementedError("a Constant without a numeric value is not supported");
}

absl::StatusOr<DType> CastTarget(int to) {
  using TP = TensorProto;
  switch (to) {
    case TP::FLOAT:
    case TP::DOUBLE:
    case TP::FLOAT16:
    case TP::BFLOAT16:
      return DType::kFloat32;
    case TP::INT64:
    case TP::INT32:
    case TP::INT16:
    case TP::INT8:
    case TP::UINT8:
    case TP::UINT16:
    case TP::UINT32:
    case TP::UINT64:
    case TP::BOOL:
      return DType::kInt64;
    default:
      return absl::UnimplementedError(absl::StrCat("Cast to ", OnnxTypeName(to)));
  }
}

absl::Status Reduce(Ctx& c, TensorOpKind kind) {
  const int since = kind == TensorOpKind::kReduceSum ? 13 : 18;
  auto axes = ConstantInts(AxesOperand(c, since, "axes", 1), "axes");
  if (!axes.ok()) return axes.status();
  if (axes->empty() && c.attrs.Int("noop_with_empty_axes", 0) != 0) {
    return BindOutputs(c, {Input(c, 0)});
  }
  return EmitOp(c, {.kind = kind, .ints = *axes, .keep_dims = c.attrs.Int("keepdims", 1) != 0},
                {Input(c, 0)});
}

absl::Status Split(Ctx& c) {
  TensorOpSpec spec{.kind = TensorOpKind::kSplit, .axis = c.attrs.Int("axis", 0)};
  auto sizes = ConstantInts(AxesOperand(c, 13, "split", 1), "split");
  if (!sizes.ok()) return sizes.status();
  spec.ints = *sizes;
  spec.num_outputs = static_cast<int>(c.attrs.Int("num_outputs", c.node.output_size()));
  return EmitOp(c, spec, {Input(c, 0)});
}

absl::Status Slice(Ctx& c) {
  if (c.b->opset() < 10) {
    return EmitOp(c, {.kind = TensorOpKind::kSlice},
                  {Input(c, 0), IntsRef(c.attrs.Ints("starts")), IntsRef(c.attrs.Ints("ends")),
                   c.attrs.Has("axes") ? IntsRef(c.attrs.Ints("axes")) : Ref{.absent = true}});
  }
  return EmitOp(c, {.kind = TensorOpKind::kSlice},
                {Input(c, 0), Input(c, 1), Input(c, 2), Input(c, 3), Input(c, 4)});
}

absl::Status Clip(Ctx& c) {
  Ref lo = Input(c, 1), hi = Input(c, 2);
  if (c.b->opset() < 11) {
    lo = c.attrs.Has("min") ? Ref{.constant = Tensor::Float({}, {c.attrs.Float("min", 0)})}
                            : Ref{.absent = true};
    hi = c.attrs.Has("max") ? Ref{.constant = Tensor::Float({}, {c.attrs.Float("max", 0)})}
                            : Ref{.absent = true};
  }
  Ref x = Input(c, 0);
  const std::string name = c.node.name();
  if (!lo.absent) {
    auto r = c.b->Emit1({.kind = TensorOpKind::kMax}, {x, lo}, name + "/min", "onnx::Clip");
    if (!r.ok()) return r.status();
    x = *r;
  }
  if (!hi.absent) {
    auto r = c.b->Emit1({.kind = TensorOpKind::kMin}, {x, hi}, name + "/max", "onnx::Clip");
    if (!r.ok()) return r.status();
    x = *r;
  }
  return BindOutputs(c, {x});
}

absl::Status Shape(Ctx& c) {
  auto shape =
      c.b->Emit1({.kind = TensorOpKind::kShape}, {Input(c, 0)}, c.node.name(), "onnx::Shape");
  if (!shape.ok()) return shape.status();
  if (!c.attrs.Has("start") && !c.attrs.Has("end")) return BindOutputs(c, {*shape});
  const int64_t end = c.attrs.Int("end", INT64_MAX);
  return EmitOp(c, {.kind = TensorOpKind::kSlice},
                {*shape, IntsRef({c.attrs.Int("start", 0)}), IntsRef({end})});
}

// Variadic Min / Max / Sum as a chain of binary ops.
absl::Status Variadic(Ctx& c, TensorOpKind kind) {
  Ref acc = Input(c, 0);
  for (size_t i = 1; i < c.in.size(); ++i) {
    auto r = c.b->Emit1({.kind = kind}, {acc, c.in[i]}, absl::StrCat(c.node.name(), "/", i),
                        "onnx::" + c.node.op_type());
    if (!r.ok()) return r.status();
    acc = *r;
  }
  return BindOutputs(c, {acc});
}

using Handler = std::function<absl::Status(Ctx&)>;

const std::map<std::string, Handler>& Handlers() {
  static const auto* const kHandlers = new std::map<std::string, Handler>{
      {"Constant", Constant},
      {"Identity", [](Ctx& c) { return BindOutputs(c, {Input(c, 0)}); }},
      {"Dropout", [](Ctx& c) { return BindOutputs(c, {Input(c, 0)}); }},
      {"Shape", Shape},
      {"Gather",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kGather, .axis = c.attrs.Int("axis", 0)},
                       {Input(c, 0), Input(c, 1)});
       }},
      {"Concat",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kConcat, .axis = c.attrs.Int("axis", 0)}, c.in);
       }},
      {"Unsqueeze",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kUnsqueeze},
                       {Input(c, 0), AxesOperand(c, 13, "axes", 1)});
       }},
      {"Squeeze",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kSqueeze},
                       {Input(c, 0), AxesOperand(c, 13, "axes", 1)});
       }},
      {"Slice", Slice},
      {"Transpose",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kTranspose, .ints = c.attrs.Ints("perm")},
                       {Input(c, 0)});
       }},
      {"Reshape",
       [](Ctx& c) {
         return EmitOp(
             c, {.kind = TensorOpKind::kReshape, .allow_zero = c.attrs.Int("allowzero", 0) != 0},
             {Input(c, 0), Input(c, 1)});
       }},
      {"Flatten",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kFlatten, .axis = c.attrs.Int("axis", 1)},
                       {Input(c, 0)});
       }},
      {"Expand",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kExpand}, {Input(c, 0), Input(c, 1)});
       }},
      {"Cast",
       [](Ctx& c) -> absl::Status {
         auto to = CastTarget(static_cast<int>(c.attrs.Int("to", 0)));
         if (!to.ok()) return to.status();
         return EmitOp(c, {.kind = TensorOpKind::kCast, .to = *to}, {Input(c, 0)});
       }},
      {"ConstantOfShape",
       [](Ctx& c) -> absl::Status {
         TensorOpSpec spec{.kind = TensorOpKind::kConstantOfShape};
         if (const TensorProto* t = c.attrs.Tensor("value")) {
           auto v = TensorFromProto(*t, NodeLabel(c.node) + " value");
           if (!v.ok()) return v.status();
           if (v->num_elements() != 1)
             return absl::InvalidArgumentError("value must hold one element");
           spec.value = std::move(*v);
         }
         return EmitOp(c, std::move(spec), {Input(c, 0)});
       }},
      {"Range",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kRange}, {Input(c, 0), Input(c, 1), Input(c, 2)});
       }},
      {"Add",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kAdd}, {Input(c, 0), Input(c, 1)});
       }},
      {"Sub",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kSub}, {Input(c, 0), Input(c, 1)});
       }},
      {"Mul",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kMul}, {Input(c, 0), Input(c, 1)});
       }},
      {"Div",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kDiv}, {Input(c, 0), Input(c, 1)});
       }},
      {"Pow",
       [](Ctx& c) {
         return EmitOp(c, {.kind = TensorOpKind::kPow}, {Input(c, 0), Input(c, 1)});
       }},
      {"Min", [](Ctx& c) { return Variadic(c, TensorOpKind::kMin); }},
      {"Max", [](Ctx& c) { return Variadic(c, TensorOpKind::kMax); }},
      {"Sum", [](Ctx& c) { return Variadic(c, TensorOpKind::kAdd); }},
      {"Clip", Clip},
      {"MatMul", [](Ctx& c) { return DenseOrGeneric(c, false); }},
      {"Gemm", [](Ctx& c) { return DenseOrGeneric(c, true); }},
      {"Neg", [](Ctx& c) { return Unary(c, TensorOpKind::kNeg); }},
      {"Abs", [](Ctx& c) { return Unary(c, TensorOpKind::kAbs); }},
      {"Sqrt", [](Ctx& c) { return Unary(c, TensorOpKind::kSqrt); }},
      {"Exp", [](Ctx& c) { return Unary(c, TensorOpKind::kExp); }},
      {"Log", [](Ctx& c) { return Unary(c, TensorOpKind::kLog); }},
      {"Reciprocal", [](Ctx& c) { return Unary(c, TensorOpKind::kReciprocal); }},
      {"Relu", [](Ctx& c) { return Act(c, ActivationKind::kRelu); }},
      {"Tanh", [](Ctx& c) { return Act(c, ActivationKind::kTanh); }},
      {"Sigmoid", [](Ctx& c) { return Act(c, ActivationKind::kSigmoid); }},
      {"Softsign", [](Ctx& c) { return Act(c, ActivationKind::kSoftsign); }},
      {"Softplus", [](Ctx& c) { return Act(c, ActivationKind::kSoftplus); }},
      {"LeakyRelu",
       [](Ctx& c) { return Act(c, ActivationKind::kLeakyRelu, c.attrs.Float("alpha", 0.01f)); }},
      {"ThresholdedRelu",
       [](Ctx& c) {
         return Act(c, ActivationKind::kThresholdedRelu, c.attrs.Float("alpha", 1.0f));
       }},
      {"Elu", [](Ctx& c) { return Act(c, ActivationKind::kElu, c.attrs.Float("alpha", 1.0f)); }},
      {"HardSigmoid",
       [](Ctx& c) {
         return Act(c, ActivationKind::kHardSigmoid, c.attrs.Float("alpha", 0.2f),
                    c.attrs.Float("beta", 0.5f));
       }},
      {"Gelu",
       [](Ctx& c) -> absl::Status {
         if (c.attrs.String("approximate", "none") != "none") {
           return absl::UnimplementedError("Gelu with approximate='tanh' is not supported");
         }
         return Act(c, ActivationKind::kGelu);
       }},
      {"Softmax",
       [](Ctx& c) {
         const bool old = c.b->opset() < 13;
         return EmitOp(c,
                       {.kind = TensorOpKind::kSoftmax,
                        .axis = c.attrs.Int("axis", old ? 1 : -1),
                        .coerce_2d = old},
                       {Input(c, 0)});
       }},
      {"LogSoftmax",
       [](Ctx& c) {
         const bool old = c.b->opset() < 13;
         return EmitOp(c,
                       {.kind = TensorOpKind::kLogSoftmax,
                        .axis = c.attrs.Int("axis", old ? 1 : -1),
                        .coerce_2d = old},
                       {Input(c, 0)});
       }},
      {"Split", Split},
      {"ReduceMean", [](Ctx& c) { return Reduce(c, TensorOpKind::kReduceMean); }},
      {"ReduceSum", [](Ctx& c) { return Reduce(c, TensorOpKind::kReduceSum); }},
      {"ReduceMax", [](Ctx& c) { return Reduce(c, TensorOpKind::kReduceMax); }},
  };
  return *kHandlers;
}

}  // namespace

absl::Status ImportNode(const NodeProto& node, GraphBuilder* builder) {
  const std::string where = absl::StrCat(NodeLabel(node), " at opset ", builder->opset(), ": ");
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::UnimplementedError(
        absl::StrCat(where, "domain '", node.domain(), "' is not supported"));
  }
  const std::string& op = node.op_type();
  absl::Status s;
  if (op == "LSTM" || op == "GRU" || op == "RNN") {
    s = ImportRecurrentNode(node, builder);
  } else {
    auto it = Handlers().find(op);
    if (it == Handlers().end()) {
      return absl::UnimplementedError(absl::StrCat(where, "op type ", op, " is not supported"));
    }
    const NodeAttributes attrs(node);
    Ctx ctx{node, attrs, builder, {}};
    for (const std::string& name : node.input()) {
      auto r = builder->Resolve(name);
      if (!r.ok())
        return absl::Status(r.status().code(), where + std::string(r.status().message()));
      ctx.in.push_back(std::move(*r));
    }
    s = it->second(ctx);
  }
  if (!s.ok()) return absl::Status(s.code(), where + std::string(s.message()));
  return absl::OkStatus();
}

}  // namespace rnnserve::models::onnx
