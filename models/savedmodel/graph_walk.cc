// The walk of graph_layers.h: from the serving function's outputs back to the model's inputs,
// one Keras layer at a time, into a graph of layer calls (a Keras functional model). A value
// two layers read (a shared LSTM output feeding two heads) is recognised once: the walk keeps
// the traced source of every output it has recognised.
//
// Merges: ConcatV2 is a Bidirectional(concat) when its two inputs are the forward and backward
// halves of one recurrent layer, a Concatenate otherwise; AddV2 is tf.nn.batch_normalization's
// (BatchNormalization), a Bidirectional(sum) or an Add; Mul is tf_keras's Masking (by the cast
// mask), a Bidirectional(mul) or a Multiply; RealDiv(AddV2(a, b), 2) a Bidirectional(ave) or
// an Average. A Bidirectional(merge_mode=None) is two consecutive model outputs.

#include "absl/strings/str_cat.h"
#include "models/savedmodel/graph_layers.h"

namespace rnnserve::models::savedmodel::graph {
namespace {

constexpr int kMaxLayers = 256;

bool IsDenseOp(const std::string& op) {
  return op == "BiasAdd" || op == "MatMul" || op == "Reshape";
}

bool SameSource(const Source& a, const Source& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Source::Kind::kNode) {
    return a.node == b.node && a.output == b.output && a.output_arg == b.output_arg;
  }
  return a.index == b.index;
}

}  // namespace

const Recogniser::Memo* Recogniser::Find(const Source& s) const {
  for (const Memo& m : memo_) {
    if (SameSource(m.at, s)) return &m;
  }
  return nullptr;
}

absl::StatusOr<LayerGraph> Recogniser::Walk(const std::vector<std::string>& top_rets) {
  std::vector<Value> outs;
  for (const std::string& r : top_rets) outs.push_back({&graph_.top(), r});
  for (size_t i = 0; i < outs.size(); ++i) {
    auto s = graph_.Trace(*outs[i].frame, outs[i].name);
    if (!s.ok()) return Error(s.status().message());
    if (const Memo* known = Find(*s)) {
      out_.outputs.push_back(known->ref);
      continue;
    }
    // Bidirectional(merge_mode=None): its two outputs are the model's outputs i and i + 1.
    if (i + 1 < outs.size() && s->kind == Source::Kind::kNode) {
      auto bidi = BidirectionalOf(outs[i], outs[i + 1], Json());
      if (!bidi.ok()) return bidi.status();
      if (*bidi) {
        auto bw = graph_.Trace(*outs[i + 1].frame, outs[i + 1].name);
        if (!bw.ok()) return bw.status();
        auto in = Resolve((*bidi)->inputs[0], 1);
        if (!in.ok()) return in.status();
        const int id = static_cast<int>(out_.nodes.size());
        out_.nodes.push_back({std::move((*bidi)->layer), {*in}, 2});
        memo_.push_back({*s, Ref{id, 0}});
        memo_.push_back({*bw, Ref{id, 1}});
        out_.outputs.push_back({id, 0});
        out_.outputs.push_back({id, 1});
        ++i;
        continue;
      }
    }
    auto ref = Resolve(outs[i], 0);
    if (!ref.ok()) return ref.status();
    out_.outputs.push_back(*ref);
  }
  if (!open_masks_.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(dir_,
                     ": a SavedModel without Keras metadata whose recurrent layer is masked by "
                     "something other than a Masking or Embedding(mask_zero=True) layer",
                     kBringKeras));
  }
  return std::move(out_);
}

absl::StatusOr<Ref> Recogniser::Resolve(const Value& v, int depth) {
  if (depth > kMaxLayers || static_cast<int>(out_.nodes.size()) > kMaxLayers) {
    return Error(absl::StrCat("more than ", kMaxLayers, " layers"));
  }
  auto s = graph_.Trace(*v.frame, v.name);
  if (!s.ok()) return Error(s.status().message());
  if (s->kind == Source::Kind::kModelInput) return Ref{-1 - s->index, 0};
  if (s->kind == Source::Kind::kObject) return Error("the output is a variable");
  if (const Memo* known = Find(*s)) {
    if (known->mask_source) {
      for (auto it = open_masks_.begin(); it != open_masks_.end();) {
        it = Same(*it, *known->mask_source) ? open_masks_.erase(it) : it + 1;
      }
    }
    return known->ref;
  }
  auto layer = RecogniseAt(*s);
  if (!layer.ok()) return layer.status();
  GraphNode node;
  node.num_outputs = 1 + static_cast<int>(layer->more_outputs.size());
  const Json& cls = layer->layer.config["class_name"];
  const bool keras_merge =
      cls == "Concatenate" || cls == "Add" || cls == "Multiply" || cls == "Average";
  for (const Value& in : layer->inputs) {
    auto ref = Resolve(in, depth + 1);
    // An op that merely looks like a merge (a LayerNormalization's AddV2) is named itself.
    if (!ref.ok() && keras_merge && absl::IsUnimplemented(ref.status())) {
      return Unsupported(s->node->op(), s->node->name());
    }
    if (!ref.ok()) return ref.status();
    node.inputs.push_back(*ref);
  }
  std::optional<Value> mask_source;
  if (cls == "Masking" || cls == "Embedding") mask_source = layer->inputs[0];
  node.layer = std::move(layer->layer);
  const int id = static_cast<int>(out_.nodes.size());
  out_.nodes.push_back(std::move(node));
  memo_.push_back({*s, Ref{id, 0}, mask_source});
  for (size_t t = 0; t < layer->more_outputs.size(); ++t) {
    const Value& more = layer->more_outputs[t];
    auto at = graph_.Trace(*more.frame, more.name);
    if (!at.ok()) return at.status();
    memo_.push_back({*at, Ref{id, static_cast<int>(t) + 1}});
  }
  return Ref{id, 0};
}

absl::StatusOr<Recognised> Recogniser::RecogniseAt(const Source& s) {
  const NodeDef& node = *s.node;
  const Frame& frame = *s.frame;
  if (const char* act = ActivationOf(node.op())) {
    // A Dense layer's own activation, or an Activation layer.
    auto in = graph_.TraceInput(frame, node, 0);
    if (!in.ok()) return in.status();
    const std::string activation = act;
    if (in->kind == Source::Kind::kNode && IsDenseOp(in->node->op()) && !Find(*in)) {
      return Single(
          [&](std::vector<Layer>* l) { return Dense(*in->frame, *in->node, activation, l); });
    }
    auto x = FunctionGraph::Input(node, 0);
    if (!x.ok()) return x.status();
    return One({Json{{"class_name", "Activation"}, {"config", {{"activation", activation}}}}, {}},
               Value{&frame, *x});
  }
  if (IsDenseOp(node.op())) {
    return Single([&](std::vector<Layer>* l) { return Dense(frame, node, "", l); });
  }
  if (node.op() == "SelectV2" || node.op() == "Select") {
    return Single([&](std::vector<Layer>* l) { return Masking(frame, node, l); });
  }
  if (node.op() == "ConcatV2" || node.op() == "AddV2" || node.op() == "Mul" ||
      node.op() == "RealDiv") {
    return Merge(s);
  }
  if (node.op() == "GatherV2" || node.op() == "ResourceGather") {
    return Single([&](std::vector<Layer>* l) { return Embedding(frame, node, l); });
  }
  auto found = RnnOutput(s);
  if (!found.ok()) return found.status();
  if (found->mask_from) open_masks_.push_back(*found->mask_from);
  return One(std::move(found->layer), found->x);
}

absl::StatusOr<Recognised> Recogniser::Merge(const Source& s) {
  const NodeDef& node = *s.node;
  const Frame& frame = *s.frame;
  auto input_op = [&](int i) -> std::string {
    auto in = graph_.TraceInput(frame, node, i);
    return in.ok() && in->kind == Source::Kind::kNode ? in->node->op() : "";
  };
  auto inputs = [&](const NodeDef& n, int count) -> absl::StatusOr<std::vector<Value>> {
    std::vector<Value> values;
    for (int i = 0; i < count; ++i) {
      auto x = FunctionGraph::Input(n, i);
      if (!x.ok()) return x.status();
      values.push_back({&frame, *x});
    }
    return values;
  };
  // A two-input merge: a Bidirectional when `a` and `b` are its halves, else the Keras layer.
  auto merge2 = [&](const NodeDef& n, const char* bidi_mode,
                    const char* cls) -> absl::StatusOr<Recognised> {
    auto xs = inputs(n, 2);
    if (!xs.ok()) return xs.status();
    auto bidi = BidirectionalOf((*xs)[0], (*xs)[1], bidi_mode);
    if (!bidi.ok()) return bidi.status();
    if (*bidi) return std::move(**bidi);
    Recognised r;
    r.layer = {Json{{"class_name", cls}, {"config", Json::object()}}, {}};
    r.inputs = std::move(*xs);
    return r;
  };
  if (node.op() == "ConcatV2") {
    int n = 0;
    for (const std::string& in : node.input()) n += !in.empty() && in[0] != '^';
    if (n < 3) return Unsupported(node.op(), node.name());
    auto axis = ScalarConst(frame, node, n - 1);
    if (!axis.ok()) return axis.status();
    if (n == 3) {
      auto bidi = merge2(node, "concat", "Concatenate");
      if (!bidi.ok()) return bidi.status();
      if (bidi->layer.config["class_name"] == "Bidirectional") return bidi;
    }
    auto xs = inputs(node, n - 1);
    if (!xs.ok()) return xs.status();
    Recognised r;
    r.layer = {Json{{"class_name", "Concatenate"}, {"config", {{"axis", static_cast<int>(*axis)}}}},
               {}};
    r.inputs = std::move(*xs);
    return r;
  }
  if (node.op() == "AddV2") {
    if (input_op(0) == "Mul" && input_op(1) == "Sub") {
      return Single([&](std::vector<Layer>* l) { return BatchNormalization(frame, node, l); });
    }
    return merge2(node, "sum", "Add");
  }
  if (node.op() == "Mul") {
    if (input_op(1) == "Cast") {
      return Single([&](std::vector<Layer>* l) { return Masking(frame, node, l); });
    }
    return merge2(node, "mul", "Multiply");
  }
  // RealDiv(AddV2(a, b), 2): ave.
  auto two = ScalarConst(frame, node, 1);
  if (!two.ok() || *two != 2.0f || input_op(0) != "AddV2") {
    return Unsupported(node.op(), node.name());
  }
  auto add = graph_.TraceInput(frame, node, 0);
  if (!add.ok()) return add.status();
  const NodeDef& sum = *add->node;
  std::vector<Value> xs;
  for (int i = 0; i < 2; ++i) {
    auto x = FunctionGraph::Input(sum, i);
    if (!x.ok()) return x.status();
    xs.push_back({add->frame, *x});
  }
  auto bidi = BidirectionalOf(xs[0], xs[1], "ave");
  if (!bidi.ok()) return bidi.status();
  if (*bidi) return std::move(**bidi);
  Recognised r;
  r.layer = {Json{{"class_name", "Average"}, {"config", Json::object()}}, {}};
  r.inputs = std::move(xs);
  return r;
}

}  // namespace rnnserve::models::savedmodel::graph
