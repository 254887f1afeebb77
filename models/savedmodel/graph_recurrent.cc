// The recurrent layers of graph_layers.h: While loops over a TensorList of the input's steps
// (Keras 3's backend rnn() and tf_keras's standard_lstm / standard_gru), and Bidirectional.

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/savedmodel/graph_layers.h"

namespace rnnserve::models::savedmodel::graph {
namespace {

// Ops a masked loop's body adds: the mask selects between the new and the carried values.
bool MaskPlumbing(const std::string& op) {
  return op == "SelectV2" || op == "Select" || op == "Tile" || op == "ExpandDims";
}

// Ops a recurrent cell's loop body may hold besides its activations.
bool CellPlumbing(const std::string& op) {
  static const auto* kOps = new std::set<std::string>{"Const",
                                                      "Identity",
                                                      "NoOp",
                                                      "ReadVariableOp",
                                                      "TensorListGetItem",
                                                      "MatMul",
                                                      "BiasAdd",
                                                      "AddV2",
                                                      "Add",
                                                      "Sub",
                                                      "Mul",
                                                      "Split",
                                                      "SplitV",
                                                      "Squeeze",
                                                      "StridedSlice",
                                                      "Unpack",
                                                      "TensorListSetItem",
                                                      "Less",
                                                      "LogicalAnd",
                                                      "ConcatV2",
                                                      "Cast",
                                                      "GatherV2",
                                                      "Shape",
                                                      "Pack",
                                                      "Reshape",
                                                      "Fill",
                                                      "ZerosLike",
                                                      "OnesLike"};
  return kOps->count(op) != 0;
}

}  // namespace

// Transpose(TensorListStack(while:3)) (return_sequences), StridedSlice(...) (its last step) or
// While:4 (the last h).
absl::StatusOr<RnnFound> Recogniser::RnnOutput(const Source& out) {
  const NodeDef& node = *out.node;
  if (absl::StartsWith(node.op(), "CudnnRNN")) {
    if (out.output_arg != "output") return Unsupported(node.op(), node.name());
    return CudnnRnn(out, /*return_sequences=*/true);
  }
  if (node.op() ==
      "ReverseV2") {  // a go_backwards cuDNN layer's ReverseV2(ReverseSequence(output))
    auto rs = graph_.TraceInput(*out.frame, node, 0);
    if (!rs.ok()) return rs.status();
    if (rs->kind == Source::Kind::kNode && rs->node->op() == "ReverseSequence") {
      auto cudnn = graph_.TraceInput(*rs->frame, *rs->node, 0);
      if (!cudnn.ok()) return cudnn.status();
      if (cudnn->kind == Source::Kind::kNode && absl::StartsWith(cudnn->node->op(), "CudnnRNN") &&
          cudnn->output_arg == "output") {
        auto found = CudnnRnn(*cudnn, /*return_sequences=*/true);
        if (!found.ok()) return found.status();
        if (found->layer.config["config"]["go_backwards"] != true) {
          return Unsupported(node.op(), node.name());
        }
        return found;
      }
    }
    return Unsupported(node.op(), node.name());
  }
  if (node.op() == "Squeeze") {  // a cuDNN layer's last output: Squeeze(output_h)
    auto h = graph_.TraceInput(*out.frame, node, 0);
    if (!h.ok()) return h.status();
    if (h->kind == Source::Kind::kNode && absl::StartsWith(h->node->op(), "CudnnRNN") &&
        h->output_arg == "output_h") {
      return CudnnRnn(*h, /*return_sequences=*/false);
    }
    return Unsupported(node.op(), node.name());
  }
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
absl::StatusOr<std::optional<Value>> Recogniser::MaskInput(const Frame& frame,
                                                           const NodeDef& from_tensor) {
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
    if (step == 2 && s->kind == Source::Kind::kNode && s->node->op() == "Squeeze") {
      s = graph_.TraceInput(*s->frame, *s->node, 0);  // tf_keras: the mask squeezed
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

absl::StatusOr<RnnFound> Recogniser::Rnn(const Frame& frame, const NodeDef& loop,
                                         bool return_sequences) {
  std::map<std::string, keras::Array> vars;  // role -> value
  const NodeDef* from_tensor = nullptr;
  const Frame* from_frame = nullptr;
  std::string scope;  // the kernel's name up to its last '/' ("sequential/lstm/lstm_cell/")
  std::optional<Value> mask_from;  // the Masking layer's input the loop's mask is made of
  int data_inputs = 0;
  for (const std::string& in : loop.input()) data_inputs += !in.empty() && in[0] != '^';
  for (int i = 4; i < data_inputs; ++i) {
    auto s = graph_.TraceInput(frame, loop, i);
    if (!s.ok()) return s.status();
    if (s->kind == Source::Kind::kModelInput) {
      return Error(
          "a recurrent layer's initial state comes from an input, which is not "
          "recognised");
    }
    // tf_keras's GRU passes its [2, 3H] bias unstacked (Unpack) into the loop.
    if (s->kind == Source::Kind::kNode && s->node->op() == "Unpack") {
      auto whole = graph_.TraceInput(*s->frame, *s->node, 0);
      if (!whole.ok()) return whole.status();
      if (whole->kind != Source::Kind::kObject) continue;
      s = whole;
    }
    if (s->kind == Source::Kind::kObject) {
      auto v = Variable(s->index);
      if (!v.ok()) return v.status();
      const size_t slash = v->first.rfind('/');
      std::string role = v->first.substr(slash + 1);
      role = role.substr(0, role.find(':'));
      if (role == "kernel") scope = v->first.substr(0, slash + 1);
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
    return Unsupported(loop.op(), loop.name());
  }
  // A bias the layer has but that reached the loop some way not recognised would be dropped.
  if (!vars.count("bias") && HasVariable(scope + "bias")) {
    return Error(absl::StrCat("the loop '", loop.name(), "' does not take its layer's bias '",
                              scope, "bias' in a way rnnserve recognises"));
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
  const FunctionDef* fn =
      body == loop.attr().end() ? nullptr : graph_.Function(body->second.func().name());
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

// Bidirectional: the forward and backward halves' outputs over the same input, the backward
// half's sequence reversed back when it returns sequences.
absl::StatusOr<std::optional<Recognised>> Recogniser::BidirectionalOf(const Value& fw_out,
                                                                      const Value& bw_out,
                                                                      const Json& merge_mode) {
  std::vector<RnnFound> halves;
  bool reversed = false;
  for (const Value* v : {&fw_out, &bw_out}) {
    auto s = graph_.Trace(*v->frame, v->name);
    if (!s.ok()) return s.status();
    if (s->kind != Source::Kind::kNode) return std::optional<Recognised>();
    if (v == &bw_out && s->node->op() == "ReverseV2") {
      reversed = true;
      s = graph_.TraceInput(*s->frame, *s->node, 0);
      if (!s.ok()) return s.status();
      if (s->kind != Source::Kind::kNode) return std::optional<Recognised>();
    }
    auto half = RnnOutput(*s);
    if (absl::IsUnimplemented(half.status())) return std::optional<Recognised>();
    if (!half.ok()) return half.status();
    halves.push_back(std::move(*half));
  }
  Json& fw = halves[0].layer.config;
  Json& bw = halves[1].layer.config;
  if (fw["class_name"] != bw["class_name"] || fw["config"]["go_backwards"] != false ||
      bw["config"]["go_backwards"] != true ||
      fw["config"]["return_sequences"] != bw["config"]["return_sequences"] ||
      reversed != bw["config"]["return_sequences"].get<bool>() || !Same(halves[0].x, halves[1].x) ||
      halves[0].mask_from.has_value() != halves[1].mask_from.has_value()) {
    return std::optional<Recognised>();
  }
  Json config = {{"layer", fw}, {"backward_layer", bw}, {"merge_mode", merge_mode}};
  std::vector<keras::Array> weights = std::move(halves[0].layer.weights);
  for (keras::Array& a : halves[1].layer.weights) weights.push_back(std::move(a));
  if (halves[0].mask_from) open_masks_.push_back(*halves[0].mask_from);
  Recognised r = One(
      {Json{{"class_name", "Bidirectional"}, {"config", config}}, std::move(weights)}, halves[0].x);
  return std::optional<Recognised>(std::move(r));
}

}  // namespace rnnserve::models::savedmodel::graph
