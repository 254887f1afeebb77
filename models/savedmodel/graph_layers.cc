// The walk of graph_layers.h and the layers that are not recurrent.

#include "models/savedmodel/graph_layers.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::models::savedmodel::graph {
// Keras activation name of an activation op.
const char* ActivationOf(const std::string& op) {
  static const auto* kOps = new std::map<std::string, const char*>{
      {"Tanh", "tanh"}, {"Sigmoid", "sigmoid"}, {"Relu", "relu"},         {"Softmax", "softmax"},
      {"Elu", "elu"},   {"Selu", "selu"},       {"Softplus", "softplus"}, {"Softsign", "softsign"}};
  auto it = kOps->find(op);
  return it == kOps->end() ? nullptr : it->second;
}

absl::Status Recogniser::Unsupported(const std::string& op, const std::string& node) const {
  return absl::UnimplementedError(absl::StrCat(
      dir_, ": a SavedModel without Keras metadata whose serving function computes with op '", op,
      "'", node.empty() ? "" : absl::StrCat(" (node '", node, "')"),
      ", which rnnserve does not recognise as part of a Keras layer it runs", kBringKeras));
}

absl::Status Recogniser::Error(absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(dir_, ": the serving function: ", what));
}

// The variable object `id`'s name and value.
absl::StatusOr<std::pair<std::string, keras::Array>> Recogniser::Variable(int id) const {
  const auto& nodes = mg_.object_graph_def().nodes();
  if (id < 0 || id >= nodes.size() || !nodes[id].has_variable()) {
    return Error(absl::StrCat("captured object ", id, " is not a variable"));
  }
  const SavedVariable& var = nodes[id].variable();
  std::string key;
  if (id < checkpoint_graph_.nodes_size()) {
    for (const auto& attr : checkpoint_graph_.nodes(id).attributes()) {
      if (attr.name() == "VARIABLE_VALUE") key = attr.checkpoint_key();
    }
  }
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": variable '", var.name(), "' (object ",
                                                   id,
                                                   ") has no value in variables/variables.index"));
  }
  auto array = bundle_.ReadFloat(key);
  if (!array.ok()) return array.status();
  std::vector<int64_t> want;
  for (const auto& d : var.shape().dim()) want.push_back(d.size());
  if (array->shape != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir_, ": variable '", var.name(), "' has shape [", absl::StrJoin(array->shape, ","),
        "] in the checkpoint, [", absl::StrJoin(want, ","), "] in saved_model.pb"));
  }
  return std::make_pair(var.name(), std::move(*array));
}

bool Recogniser::HasVariable(const std::string& name) const {
  for (const SavedObject& node : mg_.object_graph_def().nodes()) {
    if (node.has_variable() && node.variable().name() == name) return true;
  }
  return false;
}

// The variable behind a node's input `i`, which must be one.
absl::StatusOr<std::pair<std::string, keras::Array>> Recogniser::WeightInput(const Frame& frame,
                                                                             const NodeDef& node,
                                                                             int i) {
  auto s = graph_.TraceInput(frame, node, i);
  if (!s.ok()) return s.status();
  if (s->kind != Source::Kind::kObject) {
    return Error(
        absl::StrCat("input ", i, " of '", node.name(), "' (", node.op(), ") is not a variable"));
  }
  return Variable(s->index);
}

absl::StatusOr<const NodeDef*> Recogniser::NodeInput(const Frame& frame, const NodeDef& node, int i,
                                                     const std::string& op, const Frame** at) {
  auto s = graph_.TraceInput(frame, node, i);
  if (!s.ok()) return s.status();
  if (s->kind != Source::Kind::kNode || s->node->op() != op) {
    if (s->kind == Source::Kind::kNode) return Unsupported(s->node->op(), s->node->name());
    return Error(absl::StrCat("input ", i, " of '", node.name(), "' is not a ", op));
  }
  *at = s->frame;
  return s->node;
}

absl::StatusOr<Value> Recogniser::Dense(const Frame& frame, const NodeDef& node,
                                        const std::string& activation, std::vector<Layer>* layers) {
  std::vector<keras::Array> weights;
  const NodeDef* m = &node;
  const Frame* mf = &frame;
  std::optional<keras::Array> bias;
  if (node.op() == "BiasAdd") {
    auto b = WeightInput(frame, node, 1);
    if (!b.ok()) return b.status();
    bias = std::move(b->second);
    auto s = graph_.TraceInput(frame, node, 0);
    if (!s.ok()) return s.status();
    if (s->kind != Source::Kind::kNode) return Error("a BiasAdd of no MatMul");
    m = s->node;
    mf = s->frame;
  }
  Value x;
  const NodeDef* matmul = m;
  const Frame* matmul_frame = mf;
  if (m->op() == "Reshape") {  // Tensordot over [B, T, F]
    auto mm = NodeInput(*mf, *m, 0, "MatMul", &matmul_frame);
    if (!mm.ok()) return mm.status();
    matmul = *mm;
    const Frame* rf = nullptr;
    auto reshape = NodeInput(*matmul_frame, *matmul, 0, "Reshape", &rf);
    if (!reshape.ok()) return reshape.status();
    const Frame* tf = nullptr;
    auto transpose = NodeInput(*rf, **reshape, 0, "Transpose", &tf);
    if (!transpose.ok()) return transpose.status();
    auto in = FunctionGraph::Input(**transpose, 0);
    if (!in.ok()) return in.status();
    x = {tf, *in};
  } else if (m->op() == "MatMul") {
    auto in = FunctionGraph::Input(*m, 0);
    if (!in.ok()) return in.status();
    x = {mf, *in};
  } else {
    return Unsupported(m->op(), m->name());
  }
  if (Attr(*matmul, "transpose_a") || Attr(*matmul, "transpose_b")) {
    return Unsupported("MatMul (transposed)");
  }
  auto kernel = WeightInput(*matmul_frame, *matmul, 1);
  if (!kernel.ok()) return kernel.status();
  if (kernel->second.shape.size() != 2) return Error("a Dense kernel that is not 2-D");
  const int64_t units = kernel->second.shape[1];
  weights.push_back(std::move(kernel->second));
  if (bias) weights.push_back(std::move(*bias));
  layers->push_back({Json{{"class_name", "Dense"},
                          {"config",
                           {{"units", units},
                            {"activation", activation.empty() ? "linear" : activation},
                            {"use_bias", bias.has_value()}}}},
                     std::move(weights)});
  return x;
}

// Whether two values are made by the same node output (or are the same model input).
bool Recogniser::Same(const Value& a, const Value& b) {
  auto sa = graph_.Trace(*a.frame, a.name);
  auto sb = graph_.Trace(*b.frame, b.name);
  if (!sa.ok() || !sb.ok() || sa->kind != sb->kind) return false;
  if (sa->kind == Source::Kind::kNode) return sa->node == sb->node && sa->output == sb->output;
  return sa->index == sb->index;
}

// The float scalar a Const node holds.
absl::StatusOr<float> Recogniser::ScalarConst(const Frame& frame, const NodeDef& node, int i) {
  auto s = graph_.TraceInput(frame, node, i);
  if (!s.ok()) return s.status();
  if (s->kind != Source::Kind::kNode || s->node->op() != "Const") {
    return Error(absl::StrCat("input ", i, " of '", node.name(), "' is not a constant"));
  }
  auto v = s->node->attr().find("value");
  if (v == s->node->attr().end() || !v->second.has_tensor()) {
    return Error(absl::StrCat("constant '", s->node->name(), "' holds no value"));
  }
  const TensorProto& t = v->second.tensor();
  if (t.dtype() == DT_FLOAT && t.float_val_size() >= 1) return t.float_val(0);
  if (t.dtype() == DT_INT32 && t.int_val_size() >= 1) return static_cast<float>(t.int_val(0));
  if (t.dtype() == DT_INT64 && t.int64_val_size() >= 1) return static_cast<float>(t.int64_val(0));
  if (t.dtype() == DT_FLOAT && t.tensor_content().size() == sizeof(float)) {
    float f;
    std::memcpy(&f, t.tensor_content().data(), sizeof(f));
    return f;
  }
  return Error(absl::StrCat("constant '", s->node->name(), "' is not a float scalar"));
}

// Masking: SelectV2(Any(NotEqual(x, mask_value)), x, 0) (Keras 3) or
// Mul(x, Cast(Any(NotEqual(x, mask_value)))) (tf_keras).
absl::StatusOr<Value> Recogniser::Masking(const Frame& frame, const NodeDef& node,
                                          std::vector<Layer>* layers) {
  const bool mul = node.op() == "Mul";
  const Frame* f = &frame;
  const NodeDef* n = &node;
  std::vector<const char*> chain = {"Any", "NotEqual"};
  if (mul) chain.insert(chain.begin(), "Cast");
  for (size_t step = 0; step < chain.size(); ++step) {
    const std::string op = chain[step];
    auto s = graph_.TraceInput(*f, *n, mul && step == 0 ? 1 : 0);
    if (!s.ok()) return s.status();
    if (s->kind != Source::Kind::kNode || s->node->op() != op) {
      return Unsupported(node.op(), node.name());
    }
    f = s->frame;
    n = s->node;
  }
  auto mask_value = ScalarConst(*f, *n, 1);
  if (!mask_value.ok()) return mask_value.status();
  auto x = FunctionGraph::Input(node, mul ? 0 : 1);
  auto tested = FunctionGraph::Input(*n, 0);
  if (!x.ok()) return x.status();
  if (!tested.ok()) return tested.status();
  const Value in{&frame, *x};
  if (!Same(in, Value{f, *tested})) return Unsupported(node.op(), node.name());
  for (Value& m : open_masks_) {
    if (!Same(m, in)) return Error("a recurrent layer masked by other than the Masking layer");
  }
  open_masks_.clear();
  layers->push_back(
      {Json{{"class_name", "Masking"}, {"config", {{"mask_value", *mask_value}}}}, {}});
  return in;
}

// The node behind input `i` of `node`, which must be a `op`.
absl::StatusOr<Source> Recogniser::Expect(const Frame& frame, const NodeDef& node, int i,
                                          const std::string& op, const NodeDef& layer) {
  auto s = graph_.TraceInput(frame, node, i);
  if (!s.ok()) return s.status();
  if (s->kind != Source::Kind::kNode || s->node->op() != op) {
    return Unsupported(layer.op(), layer.name());
  }
  return s;
}

// BatchNormalization at inference, as tf.nn.batch_normalization writes it:
//   AddV2(Mul(x, m), Sub(beta, Mul(moving_mean, m))), m = Mul(Rsqrt(AddV2(variance, eps)), gamma)
absl::StatusOr<Value> Recogniser::BatchNormalization(const Frame& frame, const NodeDef& node,
                                                     std::vector<Layer>* layers) {
  auto mul_x = Expect(frame, node, 0, "Mul", node);
  if (!mul_x.ok()) return mul_x.status();
  auto sub = Expect(frame, node, 1, "Sub", node);
  if (!sub.ok()) return sub.status();
  auto m = Expect(*mul_x->frame, *mul_x->node, 1, "Mul", node);
  if (!m.ok()) return m.status();
  auto rsqrt = Expect(*m->frame, *m->node, 0, "Rsqrt", node);
  if (!rsqrt.ok()) return rsqrt.status();
  auto add = Expect(*rsqrt->frame, *rsqrt->node, 0, "AddV2", node);
  if (!add.ok()) return add.status();
  auto mean_mul = Expect(*sub->frame, *sub->node, 1, "Mul", node);
  if (!mean_mul.ok()) return mean_mul.status();
  auto gamma = WeightInput(*m->frame, *m->node, 1);
  if (!gamma.ok()) return gamma.status();
  auto beta = WeightInput(*sub->frame, *sub->node, 0);
  if (!beta.ok()) return beta.status();
  auto mean = WeightInput(*mean_mul->frame, *mean_mul->node, 0);
  if (!mean.ok()) return mean.status();
  auto variance = WeightInput(*add->frame, *add->node, 0);
  if (!variance.ok()) return variance.status();
  auto epsilon = ScalarConst(*add->frame, *add->node, 1);
  if (!epsilon.ok()) return epsilon.status();
  auto x = FunctionGraph::Input(*mul_x->node, 0);
  if (!x.ok()) return x.status();
  layers->push_back(
      {Json{{"class_name", "BatchNormalization"},
            {"config", {{"axis", -1}, {"epsilon", *epsilon}, {"center", true}, {"scale", true}}}},
       {std::move(gamma->second), std::move(beta->second), std::move(mean->second),
        std::move(variance->second)}});
  return Value{mul_x->frame, *x};
}

// Embedding: GatherV2(embeddings, ids) (Keras 3 first maps negative ids: SelectV2(Less(ids,
// 0), AddV2(ids, input_dim), ids)) or tf_keras's ResourceGather(embeddings, ids).
absl::StatusOr<Value> Recogniser::Embedding(const Frame& frame, const NodeDef& node,
                                            std::vector<Layer>* layers) {
  auto table = WeightInput(frame, node, 0);
  if (!table.ok()) return table.status();
  if (table->second.shape.size() != 2) return Unsupported(node.op(), node.name());
  auto ids = FunctionGraph::Input(node, 1);
  if (!ids.ok()) return ids.status();
  Value x{&frame, *ids};
  auto s = graph_.Trace(frame, *ids);
  if (!s.ok()) return s.status();
  if (s->kind == Source::Kind::kNode && s->node->op() == "SelectV2") {
    auto raw = FunctionGraph::Input(*s->node, 2);
    if (!raw.ok()) return raw.status();
    x = Value{s->frame, *raw};
  } else if (s->kind == Source::Kind::kNode && s->node->op() == "Cast") {
    auto raw = FunctionGraph::Input(*s->node, 0);
    if (!raw.ok()) return raw.status();
    x = Value{s->frame, *raw};
  }
  bool mask_zero = false;
  for (auto it = open_masks_.begin(); it != open_masks_.end();) {
    if (Same(*it, x)) {
      mask_zero = true;
      it = open_masks_.erase(it);
    } else {
      ++it;
    }
  }
  layers->push_back({Json{{"class_name", "Embedding"},
                          {"config",
                           {{"input_dim", table->second.shape[0]},
                            {"output_dim", table->second.shape[1]},
                            {"mask_zero", mask_zero}}}},
                     {std::move(table->second)}});
  return x;
}

}  // namespace rnnserve::models::savedmodel::graph
