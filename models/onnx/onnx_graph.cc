#include "models/onnx/onnx_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tensor_op_eval.h"

namespace rnnserve::models::onnx {

using engine::TensorOperand;
using engine::TensorOpSpec;

std::string NodeLabel(const NodeProto& node) {
  if (node.name().empty() && node.output_size() > 0) {
    return absl::StrCat("node writing '", node.output(0), "' (", node.op_type(), ")");
  }
  return absl::StrCat("node '", node.name(), "' (", node.op_type(), ")");
}

engine::Layer NewLayer(const std::string& name, const std::string& source_class) {
  engine::Layer layer;
  layer.name = name;
  layer.source_class = source_class;
  return layer;
}

NodeAttributes::NodeAttributes(const NodeProto& node) {
  for (const AttributeProto& a : node.attribute()) by_name_[a.name()] = &a;
}

int64_t NodeAttributes::Int(const std::string& name, int64_t fallback) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? fallback : it->second->i();
}

float NodeAttributes::Float(const std::string& name, float fallback) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? fallback : it->second->f();
}

std::string NodeAttributes::String(const std::string& name, const std::string& fallback) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? fallback : it->second->s();
}

std::vector<int64_t> NodeAttributes::Ints(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return {};
  return {it->second->ints().begin(), it->second->ints().end()};
}

std::vector<float> NodeAttributes::Floats(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return {};
  return {it->second->floats().begin(), it->second->floats().end()};
}

std::vector<std::string> NodeAttributes::Strings(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return {};
  return {it->second->strings().begin(), it->second->strings().end()};
}

const TensorProto* NodeAttributes::Tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() || !it->second->has_t() ? nullptr : &it->second->t();
}

absl::Status GraphBuilder::Bind(const std::string& name, Ref ref) {
  if (name.empty()) return absl::OkStatus();  // an unused optional output
  if (!refs_.emplace(name, std::move(ref)).second) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is defined twice"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Ref> GraphBuilder::Resolve(const std::string& name) const {
  if (name.empty()) return Ref{.absent = true};
  auto it = refs_.find(name);
  if (it == refs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' is used before it is defined (a missing initializer or input?)"));
  }
  return it->second;
}

absl::StatusOr<std::vector<Ref>> GraphBuilder::Emit(TensorOpSpec spec,
                                                    const std::vector<Ref>& operands,
                                                    const std::string& name,
                                                    const std::string& source_class) {
  bool all_constant = true;
  spec.operands.clear();
  engine::Layer layer = NewLayer(name, source_class);
  for (const Ref& r : operands) {
    TensorOperand op;
    if (r.absent) {
      op.source = TensorOperand::Source::kAbsent;
    } else if (r.is_constant()) {
      op.source = TensorOperand::Source::kConstant;
      op.constant = r.constant;
    } else {
      op.source = TensorOperand::Source::kInput;
      layer.inputs.push_back(r.id);
      all_constant = false;
    }
    spec.operands.push_back(std::move(op));
  }
  std::vector<Ref> out;
  if (all_constant && spec.kind != engine::TensorOpKind::kAttachLengths) {
    std::vector<const engine::Tensor*> ptrs;
    for (const TensorOperand& op : spec.operands) {
      ptrs.push_back(op.source == TensorOperand::Source::kAbsent ? nullptr : &op.constant);
    }
    std::vector<engine::Tensor> folded;
    if (auto s = engine::EvaluateTensorOp(spec, ptrs, &folded); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("folding constants: ", s.message()));
    }
    for (engine::Tensor& t : folded) out.push_back(Ref{.constant = std::move(t)});
    return out;
  }
  if (layer.inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(engine::TensorOpName(spec.kind), " has no runtime operand"));
  }
  const int n = engine::TensorOpOutputCount(spec);
  for (int i = 0; i < n; ++i) {
    const int id = NewValue();
    layer.outputs.push_back(id);
    out.push_back(Ref{.id = id});
  }
  layer.spec = std::move(spec);
  AddLayer(std::move(layer));
  return out;
}

absl::StatusOr<Ref> GraphBuilder::Emit1(TensorOpSpec spec, const std::vector<Ref>& operands,
                                        const std::string& name, const std::string& source_class) {
  auto out = Emit(std::move(spec), operands, name, source_class);
  if (!out.ok()) return out.status();
  return std::move(out->front());
}

absl::StatusOr<int> GraphBuilder::Materialize(const Ref& ref, const std::string& name) {
  if (ref.id >= 0) return ref.id;
  if (ref.absent) return absl::InvalidArgumentError(absl::StrCat(name, " is absent"));
  engine::Layer layer = NewLayer(name, "onnx::Constant");
  layer.inputs = {0};
  TensorOperand op{.source = TensorOperand::Source::kConstant, .constant = ref.constant};
  layer.spec = TensorOpSpec{.kind = engine::TensorOpKind::kConstant, .operands = {op}};
  const int id = NewValue();
  layer.outputs.push_back(id);
  AddLayer(std::move(layer));
  return id;
}

}  // namespace rnnserve::models::onnx
