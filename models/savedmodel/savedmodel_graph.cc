// The graph path of savedmodel.h: SavedModels without Keras metadata (Keras 3 `model.export`,
// `tf.saved_model.save` of a tf_keras model). The serving signature's function is walked back
// from its output (function_graph.h), recognising one Keras layer at a time until the model's
// input is reached:
//   Dense               BiasAdd(MatMul(x, kernel), bias), or on [B, T, F] Keras's Tensordot
//                       (Reshape(MatMul(Reshape(Transpose(x)), kernel))), then an activation op
//   LSTM / GRU /        a While loop over TensorListFromTensor(Transpose(x)) (ReverseV2 for
//   SimpleRNN           go_backwards); Transpose(TensorListStack(while)) is return_sequences,
//                       StridedSlice(...)[-1] the last output. The cell is told by its weights:
//                       kernel [I, G*H], recurrent_kernel [H, G*H] with G = 4 (LSTM), 3 (GRU),
//                       1 (SimpleRNN); a GRU's bias [2, 3H] is reset_after=True, [3H] False.
//                       The activations are the body's activation ops (an LSTM's two `activation`
//                       and three `recurrent_activation` ops, a GRU's one and two).
//   Masking             SelectV2(Any(NotEqual(x, mask_value)), x, 0); the masked loops below it
//                       carry a second TensorList, the mask, made of the same x
//   Bidirectional       ConcatV2(forward loop, ReverseV2(go_backwards loop)) over the same x
//   BatchNormalization  tf.nn.batch_normalization's AddV2(Mul(x, m), Sub(beta, Mul(mean, m)))
//   Embedding           GatherV2 / ResourceGather of the table; mask_zero when a loop's mask is
//                       NotEqual(ids, 0)
//   Dropout             absent from a serving graph: nothing to recognise.
// Weights are the captured variables (the function's bound_inputs in the SavedObjectGraph),
// read from the checkpoint by object id; their role (kernel, recurrent_kernel, bias) is the
// last part of the variable's name, as Keras names them. The layers become a Keras Sequential
// config with the same weights, built by keras_config.h as the .h5 and .keras files are, so the
// gate order conversion is the one the Keras loaders use (Keras: LSTM i,f,c,o; GRU z,r,h).
// Anything else on the way (masking's Select in a loop body, an op we do not run) is refused,
// naming the op, with a request for the .keras or .h5 file.

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/keras/keras_config.h"
#include "models/savedmodel/function_graph.h"
#include "models/savedmodel/savedmodel_internal.h"
#include "models/savedmodel/tensor_bundle.h"

namespace rnnserve::models::savedmodel {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kObjectGraphKey[] = "_CHECKPOINTABLE_OBJECT_GRAPH";
constexpr int kMaxLayers = 256;

constexpr char kBringKeras[] =
    "; bring the model's .keras or .h5 file (model.save('model.keras')) or a SavedModel written "
    "by tf_keras model.save(dir)";

// Keras activation name of an activation op.
const char* ActivationOf(const std::string& op) {
  static const auto* kOps = new std::map<std::string, const char*>{
      {"Tanh", "tanh"},         {"Sigmoid", "sigmoid"}, {"Relu", "relu"},
      {"Softmax", "softmax"},   {"Elu", "elu"},         {"Selu", "selu"},
      {"Softplus", "softplus"}, {"Softsign", "softsign"}};
  auto it = kOps->find(op);
  return it == kOps->end() ? nullptr : it->second;
}

// Ops a masked loop's body adds: the mask selects between the new and the carried values.
bool MaskPlumbing(const std::string& op) {
  return op == "SelectV2" || op == "Select" || op == "Tile" || op == "ExpandDims";
}

// Ops a recurrent cell's loop body may hold besides its activations.
bool CellPlumbing(const std::string& op) {
  static const auto* kOps = new std::set<std::string>{
      "Const",   "Identity",         "NoOp",        "ReadVariableOp", "TensorListGetItem",
      "MatMul",  "BiasAdd",          "AddV2",       "Add",            "Sub",
      "Mul",     "Split",            "SplitV",      "Squeeze",        "StridedSlice",
      "Unpack",  "TensorListSetItem", "Less",       "LogicalAnd",     "ConcatV2",
      "Cast",    "GatherV2",         "Shape",       "Pack",           "Reshape",
      "Fill",    "ZerosLike",        "OnesLike"};
  return kOps->count(op) != 0;
}

struct Value {
  const Frame* frame;
  std::string name;
};

struct Layer {
  Json config;  // {"class_name", "config"}
  std::vector<keras::Array> weights;
};

// A recurrent layer recognised at its output: the layer, its input and, for a masked loop,
// the value its mask is computed from (a Masking layer's input).
struct RnnFound {
  Layer layer;
  Value x;
  std::optional<Value> mask_from;
};

class Recogniser {
 public:
  Recogniser(std::string dir, const MetaGraphDef& mg, FunctionGraph graph, TensorBundle bundle,
             TrackableObjectGraph checkpoint_graph)
      : dir_(std::move(dir)),
        mg_(mg),
        graph_(std::move(graph)),
        bundle_(std::move(bundle)),
        checkpoint_graph_(std::move(checkpoint_graph)) {}

  // The layers from the model's input to `out`, in that order.
  absl::StatusOr<std::vector<Layer>> Layers(const std::string& top_ret) {
    Value out{&graph_.top(), top_ret};
    std::vector<Layer> layers;
    std::string pending_activation;
    for (int n = 0; n < kMaxLayers; ++n) {
      auto s = graph_.Trace(*out.frame, out.name);
      if (!s.ok()) return Error(s.status().message());
      if (s->kind == Source::Kind::kModelInput) {
        if (!open_masks_.empty()) {
          return Unsupported("a mask not made by a Masking layer (e.g. Embedding mask_zero)");
        }
        if (!pending_activation.empty()) {
          layers.push_back({Json{{"class_name", "Activation"},
                                 {"config", {{"activation", pending_activation}}}},
                            {}});
        }
        std::reverse(layers.begin(), layers.end());
        return layers;
      }
      if (s->kind == Source::Kind::kObject) return Error("the output is a variable");
      const NodeDef& node = *s->node;
      const Frame& frame = *s->frame;
      if (const char* act = ActivationOf(node.op()); act && pending_activation.empty()) {
        pending_activation = act;
        auto in = FunctionGraph::Input(node, 0);
        if (!in.ok()) return in.status();
        out = {&frame, *in};
        continue;
      }
      absl::StatusOr<Value> next = absl::InternalError("unset");
      if (node.op() == "BiasAdd" || node.op() == "MatMul" || node.op() == "Reshape") {
        next = Dense(frame, node, pending_activation, &layers);
        pending_activation.clear();
      } else {
        if (!pending_activation.empty()) {
          layers.push_back({Json{{"class_name", "Activation"},
                                 {"config", {{"activation", pending_activation}}}},
                            {}});
          pending_activation.clear();
        }
        if (node.op() == "SelectV2" || node.op() == "Select") {
          next = Masking(frame, node, &layers);
        } else if (node.op() == "ConcatV2") {
          next = Bidirectional(frame, node, &layers);
        } else if (node.op() == "AddV2") {
          next = BatchNormalization(frame, node, &layers);
        } else if (node.op() == "GatherV2" || node.op() == "ResourceGather") {
          next = Embedding(frame, node, &layers);
        } else {
          auto found = RnnOutput(*s);
          if (!found.ok()) return found.status();
          if (found->mask_from) open_masks_.push_back(*found->mask_from);
          layers.push_back(std::move(found->layer));
          next = found->x;
        }
      }
      if (!next.ok()) return next.status();
      out = *next;
    }
    return Error(absl::StrCat("more than ", kMaxLayers, " layers"));
  }

  absl::Status Unsupported(const std::string& op, const std::string& node = "") const {
    return absl::UnimplementedError(absl::StrCat(
        dir_, ": a SavedModel without Keras metadata whose serving function computes with op '",
        op, "'", node.empty() ? "" : absl::StrCat(" (node '", node, "')"),
        ", which rnnserve does not recognise as part of a Keras layer it runs", kBringKeras));
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": the serving function: ", what));
  }

  // The variable object `id`'s name and value.
  absl::StatusOr<std::pair<std::string, keras::Array>> Variable(int id) const {
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
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, ": variable '", var.name(), "' (object ", id,
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

  // The variable behind a node's input `i`, which must be one.
  absl::StatusOr<std::pair<std::string, keras::Array>> WeightInput(const Frame& frame,
                                                                   const NodeDef& node, int i) {
    auto s = graph_.TraceInput(frame, node, i);
    if (!s.ok()) return s.status();
    if (s->kind != Source::Kind::kObject) {
      return Error(absl::StrCat("input ", i, " of '", node.name(), "' (", node.op(),
                                ") is not a variable"));
    }
    return Variable(s->index);
  }

  absl::StatusOr<const NodeDef*> NodeInput(const Frame& frame, const NodeDef& node, int i,
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

  static bool Attr(const NodeDef& node, const std::string& name) {
    auto it = node.attr().find(name);
    return it != node.attr().end() && it->second.b();
  }

  absl::StatusOr<Value> Dense(const Frame& frame, const NodeDef& node,
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

  // Transpose(TensorListStack(while:3)) (return_sequences), StridedSlice(...) (its last step) or
  // While:4 (the last h).
  absl::StatusOr<RnnFound> RnnOutput(const Source& out) {
    const NodeDef& node = *out.node;
    if (node.op() == "While" || node.op() == "StatelessWhile") {
      if (out.output != 4) return Unsupported(node.op(), node.name());
      return Rnn(*out.frame, node, /*return_sequences=*/false);
    }
    if (node.op() != "Transpose" && node.op() != "StridedSlice") {
      return Unsupported(node.op(), node.name());
    }
    auto stack = graph_.TraceInput(*out.frame, node, 0);
    if (!stack.ok()) return stack.status();
    if (stack->kind != Source::Kind::kNode || stack->node->op() != "TensorListStack") {
      return Unsupported(node.op(), node.name());
    }
    auto w = graph_.TraceInput(*stack->frame, *stack->node, 0);
    if (!w.ok()) return w.status();
    if (w->kind != Source::Kind::kNode ||
        (w->node->op() != "While" && w->node->op() != "StatelessWhile") || w->output != 3) {
      return Unsupported(node.op(), node.name());
    }
    return Rnn(*w->frame, *w->node, node.op() == "Transpose");
  }

  // For a loop's mask list, Transpose(ExpandDims(Any(NotEqual(x, mask_value)))) (ReverseV2 of it
  // going backwards): x, the Masking
  // layer's input; nullopt for a list that is not a mask.
  absl::StatusOr<std::optional<Value>> MaskInput(const Frame& frame, const NodeDef& from_tensor) {
    const char* chain[] = {"Transpose", "ExpandDims", "Any", "NotEqual"};
    // An Embedding's mask_zero mask has no Any: Transpose(ExpandDims(NotEqual(ids, 0))).
    const Frame* f = &frame;
    const NodeDef* n = &from_tensor;
    for (int step = 0; step < 4; ++step) {
      const std::string op = chain[step];
      auto s = graph_.TraceInput(*f, *n, 0);
      if (!s.ok()) return s.status();
      if (step == 0 && s->kind == Source::Kind::kNode && s->node->op() == "ReverseV2") {
        s = graph_.TraceInput(*s->frame, *s->node, 0);  // go_backwards
        if (!s.ok()) return s.status();
      }
      if (step == 2 && s->kind == Source::Kind::kNode && s->node->op() == "NotEqual") {
        auto zero = ScalarConst(*s->frame, *s->node, 1);
        if (!zero.ok() || *zero != 0.0f) return Unsupported("NotEqual", s->node->name());
        ++step;  // the Embedding's mask
      } else if (s->kind != Source::Kind::kNode || s->node->op() != op) {
        if (step < 2) return std::optional<Value>();  // a data list: Transpose(x)
        return s->kind == Source::Kind::kNode ? Unsupported(s->node->op(), s->node->name())
                                              : Error("a loop mask made of no Masking layer");
      }
      f = s->frame;
      n = s->node;
    }
    auto x = FunctionGraph::Input(*n, 0);
    if (!x.ok()) return x.status();
    return std::optional<Value>(Value{f, *x});
  }

  // Whether two values are made by the same node output (or are the same model input).
  bool Same(const Value& a, const Value& b) {
    auto sa = graph_.Trace(*a.frame, a.name);
    auto sb = graph_.Trace(*b.frame, b.name);
    if (!sa.ok() || !sb.ok() || sa->kind != sb->kind) return false;
    if (sa->kind == Source::Kind::kNode) return sa->node == sb->node && sa->output == sb->output;
    return sa->index == sb->index;
  }

  // The float scalar a Const node holds.
  absl::StatusOr<float> ScalarConst(const Frame& frame, const NodeDef& node, int i) {
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

  // Masking: SelectV2(Any(NotEqual(x, mask_value)), x, 0).
  absl::StatusOr<Value> Masking(const Frame& frame, const NodeDef& node,
                                std::vector<Layer>* layers) {
    const Frame* f = &frame;
    const NodeDef* n = &node;
    for (const char* op : {"Any", "NotEqual"}) {
      auto s = graph_.TraceInput(*f, *n, 0);
      if (!s.ok()) return s.status();
      if (s->kind != Source::Kind::kNode || s->node->op() != op) {
        return Unsupported(node.op(), node.name());
      }
      f = s->frame;
      n = s->node;
    }
    auto mask_value = ScalarConst(*f, *n, 1);
    if (!mask_value.ok()) return mask_value.status();
    auto x = FunctionGraph::Input(node, 1);
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
  absl::StatusOr<Source> Expect(const Frame& frame, const NodeDef& node, int i,
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
  absl::StatusOr<Value> BatchNormalization(const Frame& frame, const NodeDef& node,
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
    layers->push_back({Json{{"class_name", "BatchNormalization"},
                            {"config",
                             {{"axis", -1}, {"epsilon", *epsilon}, {"center", true},
                              {"scale", true}}}},
                       {std::move(gamma->second), std::move(beta->second),
                        std::move(mean->second), std::move(variance->second)}});
    return Value{mul_x->frame, *x};
  }

  // Embedding: GatherV2(embeddings, ids) (Keras 3 first maps negative ids: SelectV2(Less(ids,
  // 0), AddV2(ids, input_dim), ids)) or tf_keras's ResourceGather(embeddings, ids).
  absl::StatusOr<Value> Embedding(const Frame& frame, const NodeDef& node,
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

  // Bidirectional(merge_mode="concat"): ConcatV2(forward, backward), the backward half's
  // sequence reversed back (ReverseV2) when it returns sequences; both over the same input.
  absl::StatusOr<Value> Bidirectional(const Frame& frame, const NodeDef& node,
                                      std::vector<Layer>* layers) {
    std::vector<RnnFound> halves;
    for (int i = 0; i < 2; ++i) {
      auto s = graph_.TraceInput(frame, node, i);
      if (!s.ok()) return s.status();
      if (s->kind != Source::Kind::kNode) return Unsupported(node.op(), node.name());
      if (i == 1 && s->node->op() == "ReverseV2") {
        s = graph_.TraceInput(*s->frame, *s->node, 0);
        if (!s.ok()) return s.status();
        if (s->kind != Source::Kind::kNode) return Unsupported(node.op(), node.name());
      }
      auto half = RnnOutput(*s);
      if (!half.ok()) return absl::IsUnimplemented(half.status())
                                 ? Unsupported(node.op(), node.name())
                                 : half.status();
      halves.push_back(std::move(*half));
    }
    Json& fw = halves[0].layer.config;
    Json& bw = halves[1].layer.config;
    if (fw["class_name"] != bw["class_name"] || fw["config"]["go_backwards"] != false ||
        bw["config"]["go_backwards"] != true || !Same(halves[0].x, halves[1].x) ||
        halves[0].mask_from.has_value() != halves[1].mask_from.has_value()) {
      return Unsupported(node.op(), node.name());
    }
    Json config = {{"layer", fw}, {"backward_layer", bw}, {"merge_mode", "concat"}};
    std::vector<keras::Array> weights = std::move(halves[0].layer.weights);
    for (keras::Array& a : halves[1].layer.weights) weights.push_back(std::move(a));
    if (halves[0].mask_from) open_masks_.push_back(*halves[0].mask_from);
    layers->push_back({Json{{"class_name", "Bidirectional"}, {"config", config}}, std::move(weights)});
    return halves[0].x;
  }

  absl::StatusOr<RnnFound> Rnn(const Frame& frame, const NodeDef& loop, bool return_sequences) {
    std::map<std::string, keras::Array> vars;  // role -> value
    const NodeDef* from_tensor = nullptr;
    const Frame* from_frame = nullptr;
    std::optional<Value> mask_from;  // the Masking layer's input the loop's mask is made of
    int data_inputs = 0;
    for (const std::string& in : loop.input()) data_inputs += !in.empty() && in[0] != '^';
    for (int i = 4; i < data_inputs; ++i) {
      auto s = graph_.TraceInput(frame, loop, i);
      if (!s.ok()) return s.status();
      if (s->kind == Source::Kind::kModelInput) {
        return Error("a recurrent layer's initial state comes from an input, which is not "
                     "recognised");
      }
      if (s->kind == Source::Kind::kObject) {
        auto v = Variable(s->index);
        if (!v.ok()) return v.status();
        std::string role = v->first.substr(v->first.rfind('/') + 1);
        role = role.substr(0, role.find(':'));
        vars[role] = std::move(v->second);
      } else if (s->node->op() == "TensorListFromTensor") {
        auto mask = MaskInput(*s->frame, *s->node);
        if (!mask.ok()) return mask.status();
        if (*mask) {
          if (mask_from) return Unsupported(loop.op(), loop.name());
          mask_from = **mask;
          continue;
        }
        if (from_tensor) return Unsupported(loop.op(), loop.name());
        from_tensor = s->node;
        from_frame = s->frame;
      }
    }
    if (!from_tensor || !vars.count("kernel") || !vars.count("recurrent_kernel")) {
      return Unsupported(loop.op());
    }
    // The input: TensorListFromTensor(Transpose(x)) or, going backwards, of a ReverseV2.
    auto src = graph_.TraceInput(*from_frame, *from_tensor, 0);
    if (!src.ok()) return src.status();
    bool go_backwards = false;
    if (src->kind == Source::Kind::kNode && src->node->op() == "ReverseV2") {
      go_backwards = true;
      src = graph_.TraceInput(*src->frame, *src->node, 0);
      if (!src.ok()) return src.status();
    }
    if (src->kind != Source::Kind::kNode || src->node->op() != "Transpose") {
      return src->kind == Source::Kind::kNode ? Unsupported(src->node->op(), src->node->name())
                                              : Error("a loop over no transposed input");
    }
    auto x = FunctionGraph::Input(*src->node, 0);
    if (!x.ok()) return x.status();

    const keras::Array& kernel = vars["kernel"];
    const keras::Array& recurrent = vars["recurrent_kernel"];
    if (kernel.shape.size() != 2 || recurrent.shape.size() != 2 || recurrent.shape[0] <= 0 ||
        kernel.shape[1] != recurrent.shape[1] || kernel.shape[1] % recurrent.shape[0] != 0) {
      return Error("recurrent weights of unexpected shapes");
    }
    const int64_t H = recurrent.shape[0];
    const int64_t G = kernel.shape[1] / H;
    std::string cls = G == 4 ? "LSTM" : G == 3 ? "GRU" : G == 1 ? "SimpleRNN" : "";
    if (cls.empty()) return Error(absl::StrCat("a loop with ", G, " gates"));
    Json config = {{"units", H},
                   {"return_sequences", return_sequences},
                   {"go_backwards", go_backwards},
                   {"use_bias", vars.count("bias") != 0}};
    if (cls == "GRU") {
      config["reset_after"] = vars.count("bias") ? vars["bias"].shape.size() == 2 : true;
    }
    // The body's activations.
    auto body = loop.attr().find("body");
    const FunctionDef* fn = body == loop.attr().end() ? nullptr
                                                      : graph_.Function(body->second.func().name());
    if (!fn) return Error("a While without its body function");
    std::map<std::string, int> acts;  // Keras name -> ops
    int matmuls = 0;
    for (const NodeDef& n : fn->node_def()) {
      if (const char* a = ActivationOf(n.op())) {
        ++acts[a];
      } else if (!CellPlumbing(n.op()) && !(mask_from && MaskPlumbing(n.op()))) {
        return Unsupported(n.op(), n.name());
      }
      matmuls += n.op() == "MatMul";
    }
    if (cls == "GRU" && !vars.count("bias")) config["reset_after"] = matmuls == 2;
    const int want_act = cls == "SimpleRNN" ? 1 : 2 - (cls == "GRU");
    const int want_rec = cls == "LSTM" ? 3 : cls == "GRU" ? 2 : 0;
    std::string act, rec;
    for (const auto& [name, count] : acts) {
      if (count == want_act + want_rec) {
        act = rec = name;
      } else if (count == want_act) {
        act = name;
      } else if (count == want_rec) {
        rec = name;
      }
    }
    if (act.empty() || (want_rec > 0 && rec.empty()) ||
        static_cast<int>(acts.size()) > (act == rec ? 1 : 2)) {
      std::vector<std::string> seen;
      for (const auto& [name, count] : acts) seen.push_back(absl::StrCat(name, " x", count));
      return Error(absl::StrCat("a ", cls, " loop body whose activations (",
                                absl::StrJoin(seen, ", "), ") are not recognised"));
    }
    config["activation"] = act;
    if (want_rec > 0) config["recurrent_activation"] = rec;
    std::vector<keras::Array> weights = {std::move(vars["kernel"]),
                                         std::move(vars["recurrent_kernel"])};
    if (vars.count("bias")) weights.push_back(std::move(vars["bias"]));
    RnnFound found;
    found.layer = {Json{{"class_name", cls}, {"config", config}}, std::move(weights)};
    found.x = Value{src->frame, *x};
    found.mask_from = mask_from;
    return found;
  }

  const std::string dir_;
  const MetaGraphDef& mg_;
  FunctionGraph graph_;
  const TensorBundle bundle_;
  const TrackableObjectGraph checkpoint_graph_;
  // Masking layer inputs that recognised recurrent layers' masks are made of, until the
  // Masking layer itself is reached (walking back).
  std::vector<Value> open_masks_;
};

}  // namespace

absl::StatusOr<engine::Model> LoadGraphSavedModel(const std::string& dir, const MetaGraphDef& mg,
                                                  const SignatureDef& sig) {
  if (sig.inputs_size() != 1 || sig.outputs_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        dir, ": a SavedModel without Keras metadata whose serving signature has ",
        sig.inputs_size(), " inputs and ", sig.outputs_size(),
        " outputs; rnnserve recognises graph-only SavedModels of one input and one output",
        kBringKeras));
  }
  const TensorInfo& in_info = sig.inputs().begin()->second;
  const TensorInfo& out_info = sig.outputs().begin()->second;
  const ValueName out = ParseValue(out_info.name());
  const NodeDef* call = nullptr;
  for (const NodeDef& n : mg.graph_def().node()) {
    if (n.name() == out.node) call = &n;
  }
  auto f = call ? call->attr().find("f") : google::protobuf::Map<std::string, AttrValue>::const_iterator();
  if (!call || f == call->attr().end() || !f->second.has_func() || out.index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": the serving signature's output '", out_info.name(), "' is not a function call"));
  }
  auto graph = FunctionGraph::Create(mg, f->second.func().name());
  if (!graph.ok()) return absl::InvalidArgumentError(absl::StrCat(dir, ": ", graph.status().message()));
  if (graph->num_model_inputs() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": the serving function takes ", graph->num_model_inputs(), " inputs, not 1"));
  }
  const FunctionDef& top = *graph->top().fn;
  if (out.index >= top.signature().output_arg_size()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": no output ", out.index));
  }
  auto ret = top.ret().find(top.signature().output_arg(out.index).name());
  if (ret == top.ret().end()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving function returns nothing"));
  }
  const std::string top_ret = ret->second;

  auto bundle = TensorBundle::Open((fs::path(dir) / "variables" / "variables").string());
  if (!bundle.ok()) return bundle.status();
  auto graph_bytes = bundle->ReadScalarString(kObjectGraphKey);
  if (!graph_bytes.ok()) return graph_bytes.status();
  TrackableObjectGraph checkpoint_graph;
  if (!checkpoint_graph.ParseFromString(*graph_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the checkpoint's object graph does not parse"));
  }
  Recogniser recogniser(dir, mg, std::move(*graph), std::move(*bundle),
                        std::move(checkpoint_graph));
  auto layers = recogniser.Layers(top_ret);
  if (!layers.ok()) return layers.status();
  if (layers->empty()) {
    return absl::UnimplementedError(
        absl::StrCat(dir, ": the serving function returns its input unchanged", kBringKeras));
  }

  // A Keras Sequential config of the recognised layers, built as the Keras files are.
  Json batch_shape = Json::array();
  if (in_info.tensor_shape().unknown_rank() || in_info.tensor_shape().dim_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the serving signature's input has no shape"));
  }
  for (const auto& d : in_info.tensor_shape().dim()) {
    batch_shape.push_back(d.size() < 0 ? Json() : Json(d.size()));
  }
  const std::string dtype = in_info.dtype() == DT_FLOAT   ? "float32"
                            : in_info.dtype() == DT_INT32 ? "int32"
                            : in_info.dtype() == DT_INT64 ? "int64"
                                                          : "";
  if (dtype.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": the serving signature's input has dtype ", DataType_Name(in_info.dtype()),
        ", not float32, int32 or int64"));
  }
  const std::string input_name = sig.inputs().begin()->first;
  Json keras_layers = Json::array();
  keras_layers.push_back({{"class_name", "InputLayer"},
                          {"config", {{"name", input_name},
                                      {"batch_input_shape", batch_shape},
                                      {"dtype", dtype}}}});
  std::map<std::string, std::vector<keras::Array>> weights;
  std::map<std::string, int> counts;
  for (Layer& layer : *layers) {
    std::string cls = layer.config["class_name"].get<std::string>();
    std::string name = absl::AsciiStrToLower(cls);
    if (int n = counts[name]++; n > 0) absl::StrAppend(&name, "_", n);
    layer.config["config"]["name"] = name;
    keras_layers.push_back(layer.config);
    weights[name] = std::move(layer.weights);
  }
  Json model_config = {{"class_name", "Sequential"},
                       {"config", {{"name", "sequential"}, {"layers", keras_layers}}}};
  keras::KerasSource source{.file = dir, .format = "tf_savedmodel", .keras_version = "3.0.0"};
  return keras::BuildModel(model_config, source,
                           [&](const std::string& layer)
                               -> absl::StatusOr<std::vector<keras::Array>> {
                             auto it = weights.find(layer);
                             if (it == weights.end()) return std::vector<keras::Array>();
                             return it->second;
                           });
}

}  // namespace rnnserve::models::savedmodel
