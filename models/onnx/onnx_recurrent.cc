// ONNX LSTM, GRU and RNN nodes -> one RecurrentSpec layer with generic tensor ops around it.
//
// Gate orders. ONNX LSTM W/R/B rows are i, o, f, c and its peepholes P are i, o, f; GRU rows are
// z, r, h. The canonical IR order is LSTM i, f, g(=c), o with peepholes i, f, o, and GRU r, z,
// n(=h); the conversion is the row-block permutation in kLstmOrder / kGruOrder below.
//
// Layout. The recurrent kernel reads [B, T, I] and writes [B, T, D*H] plus per-direction final
// states [B, H]. Around it: X [T, B, I] (layout 0) is transposed; sequence_lens becomes the
// value's per-sequence lengths (ONNX semantics: outputs past a length are zero); initial_h/c
// [D, B, H] (layout 1: [B, D, H]) are split per direction; Y is reshaped to [B, T, D, H] and,
// for layout 0, transposed to [T, D, B, H]; Y_h and Y_c are stacked to [D, B, H] ([B, D, H]).

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "models/onnx/onnx_graph.h"
#include "models/onnx/onnx_tensor.h"

namespace rnnserve::models::onnx {
namespace {

using engine::Activation;
using engine::ActivationKind;
using engine::CellType;
using engine::DType;
using engine::RecurrentDirection;
using engine::RecurrentSpec;
using engine::Tensor;
using engine::TensorOpKind;

// Canonical gate k takes ONNX gate block kXxxOrder[k].
constexpr int kLstmOrder[] = {0, 2, 3, 1};  // i, f, g, o  <-  i, o, f, c
constexpr int kGruOrder[] = {1, 0, 2};      // r, z, n     <-  z, r, h
constexpr int kRnnOrder[] = {0};
constexpr int kPeepholeOrder[] = {0, 2, 1};  // i, f, o  <-  i, o, f

// Rows [gates*H, cols] of direction d of a [D, gates*H, cols] tensor, in canonical order.
std::vector<float> Reorder(const Tensor& t, int d, const int* order, int gates, int64_t H,
                           int64_t cols, int64_t offset_rows = 0) {
  std::vector<float> out(gates * H * cols);
  const int64_t dir_stride = t.num_elements() / t.dim(0);
  const float* src = t.f32() + d * dir_stride + offset_rows * cols;
  for (int k = 0; k < gates; ++k) {
    std::copy_n(src + order[k] * H * cols, H * cols, out.data() + k * H * cols);
  }
  return out;
}

struct ActivationDefault {
  const char* name;
  ActivationKind kind;
  int params;  // how many of alpha, beta it reads
  float alpha, beta;
};

// ONNX's list. When activation_alpha/beta run out, the defaults are onnxruntime's: those of
// the ONNX operators for LeakyRelu (0.01), HardSigmoid (0.2, 0.5) and Elu (1.0), and 0 for
// Affine, ThresholdedRelu and ScaledTanh (the spec leaves these to the runtime).
constexpr ActivationDefault kActivations[] = {
    {"relu", ActivationKind::kRelu, 0, 0, 0},
    {"tanh", ActivationKind::kTanh, 0, 0, 0},
    {"sigmoid", ActivationKind::kSigmoid, 0, 0, 0},
    {"affine", ActivationKind::kAffine, 2, 0.0f, 0.0f},
    {"leakyrelu", ActivationKind::kLeakyRelu, 1, 0.01f, 0},
    {"thresholdedrelu", ActivationKind::kThresholdedRelu, 1, 0.0f, 0},
    {"scaledtanh", ActivationKind::kScaledTanh, 2, 0.0f, 0.0f},
    {"hardsigmoid", ActivationKind::kHardSigmoid, 2, 0.2f, 0.5f},
    {"elu", ActivationKind::kElu, 1, 1.0f, 0},
    {"softsign", ActivationKind::kSoftsign, 0, 0, 0},
    {"softplus", ActivationKind::kSoftplus, 0, 0, 0},
};

// Parses the activations list. alpha and beta values are consumed in list order by the
// activations that take them (as onnxruntime does); a missing value takes the default.
absl::StatusOr<std::vector<Activation>> ParseActivations(const NodeAttributes& attrs, int per_dir,
                                                         int dirs,
                                                         const std::vector<const char*>& defaults) {
  std::vector<std::string> names = attrs.Strings("activations");
  if (names.empty()) {
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (static_cast<int>(names.size()) != per_dir * dirs) {
    return absl::InvalidArgumentError(absl::StrCat("activations lists ", names.size(),
                                                   " functions; expected ", per_dir * dirs, " (",
                                                   per_dir, " per direction)"));
  }
  const std::vector<float> alphas = attrs.Floats("activation_alpha");
  const std::vector<float> betas = attrs.Floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const std::string lower = absl::AsciiStrToLower(name);
    const ActivationDefault* def = nullptr;
    for (const ActivationDefault& a : kActivations) {
      if (lower == a.name) def = &a;
    }
    if (def == nullptr) {
      return absl::UnimplementedError(absl::StrCat("activation '", name, "' is not supported"));
    }
    float alpha = def->alpha, beta = def->beta;
    if (def->params >= 1 && ai < alphas.size()) alpha = alphas[ai++];
    if (def->params >= 2 && bi < betas.size()) beta = betas[bi++];
    out.push_back(Activation::Of(def->kind, alpha, beta));
  }
  return out;
}

absl::StatusOr<Tensor> Weight(const Ref& r, const char* what, int64_t d0, int64_t d1, int64_t d2) {
  if (r.absent) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  if (!r.is_constant()) {
    return absl::UnimplementedError(absl::StrCat(what, " must be an initializer (a constant)"));
  }
  const Tensor& t = r.constant;
  const bool rank3 = d2 >= 0;
  const bool ok = t.dtype() == DType::kFloat32 && t.rank() == (rank3 ? 3 : 2) && t.dim(0) == d0 &&
                  (d1 < 0 || t.dim(1) == d1) && (!rank3 || t.dim(2) == d2 || d2 == 0);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", engine::ShapeString(t.shape()), ", expected [", d0, ",", d1,
        rank3 ? absl::StrCat(",", d2 == 0 ? std::string("I") : absl::StrCat(d2)) : "", "]"));
  }
  if (!AllFinite(t)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds NaN or infinite values"));
  }
  return t;
}

// What a node's attributes (and R's shape, for hidden_size) say.
struct RecurrentAttributes {
  std::string op;  // LSTM, GRU or RNN
  CellType cell = CellType::kLstm;
  int G = 4;                   // gates
  const int* order = nullptr;  // kXxxOrder of the cell
  std::string direction;       // forward, reverse or bidirectional
  int D = 1;                   // directions
  int64_t layout = 0;          // 0: [T, B, ...]; 1: [B, T, ...]
  int64_t H = 0;               // hidden_size
  float clip = 0.0f;
  int per_dir = 1;                                            // activations per direction
  std::vector<Activation> acts;                               // [D * per_dir]
  int64_t state_axis() const { return layout == 0 ? 0 : 1; }  // D's axis in states
  int states_per_dir() const { return cell == CellType::kLstm ? 2 : 1; }
};

// The initializers, checked against the attributes: W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H]
// (zeros when absent), P [D, 3H] (LSTM peepholes, empty when absent).
struct RecurrentWeights {
  Tensor W, R, B, P;
  int64_t I = 0;
  bool has_peephole = false;
};

// direction, layout and hidden_size (which R's shape gives when the attribute is absent).
absl::StatusOr<RecurrentAttributes> ReadShapeAttributes(const NodeProto& node,
                                                        const NodeAttributes& attrs,
                                                        const std::vector<Ref>& in) {
  RecurrentAttributes a;
  a.op = node.op_type();
  a.cell = a.op == "LSTM" ? CellType::kLstm : a.op == "GRU" ? CellType::kGru : CellType::kSimpleRnn;
  a.G = a.cell == CellType::kLstm ? 4 : a.cell == CellType::kGru ? 3 : 1;
  a.order = a.cell == CellType::kLstm  ? kLstmOrder
            : a.cell == CellType::kGru ? kGruOrder
                                       : kRnnOrder;
  if (a.cell != CellType::kLstm && (!in[6].absent || !in[7].absent)) {
    return absl::InvalidArgumentError(absl::StrCat(a.op, " takes at most 6 inputs"));
  }
  a.direction = attrs.String("direction", "forward");
  if (a.direction != "forward" && a.direction != "reverse" && a.direction != "bidirectional") {
    return absl::InvalidArgumentError(
        absl::StrCat("direction '", a.direction, "'; expected forward, reverse or bidirectional"));
  }
  a.D = a.direction == "bidirectional" ? 2 : 1;
  a.layout = attrs.Int("layout", 0);
  if (a.layout != 0 && a.layout != 1) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", a.layout, "; expected 0 or 1"));
  }
  if (in[2].is_constant() && in[2].constant.rank() != 3) {
    return absl::InvalidArgumentError("R must be [num_directions, gates*hidden, hidden]");
  }
  a.H = attrs.Int("hidden_size", in[2].is_constant() ? in[2].constant.dim(2) : 0);
  if (a.H <= 0 || a.H > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("hidden_size ", a.H, " must be in [1, 2^20]"));
  }
  return a;
}

absl::StatusOr<RecurrentWeights> ReadWeights(const std::vector<Ref>& in,
                                             const RecurrentAttributes& a) {
  const int D = a.D, G = a.G;
  const int64_t H = a.H;
  RecurrentWeights w;
  auto W = Weight(in[1], "W", D, G * H, 0);
  if (!W.ok()) return W.status();
  w.W = std::move(*W);
  w.I = w.W.dim(2);
  if (w.I <= 0) return absl::InvalidArgumentError("W has input size 0");
  auto R = Weight(in[2], "R", D, G * H, H);
  if (!R.ok()) return R.status();
  w.R = std::move(*R);
  w.B = Tensor::Float({D, 2 * G * H});
  if (!in[3].absent) {
    auto bias = Weight(in[3], "B", D, 2 * G * H, -1);
    if (!bias.ok()) return bias.status();
    w.B = *bias;
  }
  if (!in[7].absent) {
    auto p = Weight(in[7], "P", D, 3 * H, -1);
    if (!p.ok()) return p.status();
    w.P = *p;
    w.has_peephole = true;
  }
  return w;
}

// clip and the activations.
absl::Status ReadCellAttributes(const NodeAttributes& attrs, RecurrentAttributes* a) {
  a->clip = attrs.Float("clip", 0.0f);
  if (attrs.Has("clip") && !(a->clip > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("clip ", a->clip, " must be positive"));
  }
  a->per_dir = a->G == 4 ? 3 : a->G == 3 ? 2 : 1;
  std::vector<const char*> defaults = {"Sigmoid", "Tanh", "Tanh"};
  if (a->cell == CellType::kSimpleRnn) defaults = {"Tanh"};
  defaults.resize(a->per_dir);
  auto acts = ParseActivations(attrs, a->per_dir, a->D, defaults);
  if (!acts.ok()) return acts.status();
  a->acts = std::move(*acts);
  return absl::OkStatus();
}

// The layer's spec: weights in canonical gate order per direction, ONNX masking.
RecurrentSpec BuildSpec(const NodeProto& node, const NodeAttributes& attrs,
                        const RecurrentAttributes& a, const RecurrentWeights& w) {
  const int G = a.G, per_dir = a.per_dir;
  const int64_t H = a.H, I = w.I;
  RecurrentSpec spec;
  spec.cell = a.cell;
  spec.input_size = static_cast<int>(I);
  spec.hidden_size = static_cast<int>(H);
  spec.clip = a.clip;
  spec.input_forget = a.cell == CellType::kLstm && attrs.Int("input_forget", 0) != 0;
  spec.reset_after = a.cell == CellType::kGru && attrs.Int("linear_before_reset", 0) != 0;
  spec.return_sequences = node.output_size() > 0 && !node.output(0).empty();
  spec.return_state = true;
  spec.merge = engine::MergeMode::kConcat;
  spec.masking = engine::MaskSemantics::kOnnx;
  for (int d = 0; d < a.D; ++d) {
    RecurrentDirection dir;
    dir.reverse = a.direction == "reverse" || d == 1;
    dir.f = a.acts[d * per_dir];
    if (per_dir > 1) dir.g = a.acts[d * per_dir + 1];
    if (per_dir > 2) dir.h = a.acts[d * per_dir + 2];
    dir.W = Reorder(w.W, d, a.order, G, H, I);          // [G*H, I]
    dir.R = Reorder(w.R, d, a.order, G, H, H);          // [G*H, H]
    dir.bW = Reorder(w.B, d, a.order, G, H, 1);         // [G*H]
    dir.bR = Reorder(w.B, d, a.order, G, H, 1, G * H);  // [G*H]
    if (spec.reset_after) {
      // r and z see bW + bR only as a sum: carry it in bW, so that only n's bR (which sits
      // inside r * (R h + bR_n)) remains in bR.
      for (int64_t j = 0; j < 2 * H; ++j) {
        dir.bW[j] += dir.bR[j];
        dir.bR[j] = 0.0f;
      }
    }
    if (w.has_peephole) {
      dir.peephole = Reorder(w.P, d, kPeepholeOrder, 3, H, 1);  // [3H] i, f, o
    }
    spec.directions.push_back(std::move(dir));
  }
  return spec;
}

// X -> [B, T, I], with sequence_lens as its per-sequence lengths; returns its value id.
absl::StatusOr<int> WireInput(const std::vector<Ref>& in, const RecurrentAttributes& a,
                              const std::string& name, const std::string& cls, GraphBuilder* b) {
  Ref x = in[0];
  if (x.absent) return absl::InvalidArgumentError("X is missing");
  if (a.layout == 0) {
    auto t = b->Emit1({.kind = TensorOpKind::kTranspose, .ints = {1, 0, 2}}, {x},
                      name + "/x_batch_major", cls);
    if (!t.ok()) return t.status();
    x = *t;
  }
  if (!in[4].absent) {
    auto t = b->Emit1({.kind = TensorOpKind::kAttachLengths}, {x, in[4]}, name + "/lengths", cls);
    if (!t.ok()) return t.status();
    x = *t;
  }
  return b->Materialize(x, name + "/x");
}

// Initial states, per direction [B, H]: h then c for LSTM, appended to `inputs` (nothing when
// the node gives none).
absl::Status WireInitialStates(const std::vector<Ref>& in, const RecurrentAttributes& a,
                               const std::string& name, const std::string& cls, GraphBuilder* b,
                               std::vector<int>* inputs) {
  const bool has_init = !in[5].absent || (a.cell == CellType::kLstm && !in[6].absent);
  if (!has_init) return absl::OkStatus();
  // The exporter's zero state (Shape -> ... -> ConstantOfShape): the layer starts from zeros
  // without it, and a stream's carried state can replace it.
  if (IsZeroTensor(in[5], b->model()) &&
      (a.cell != CellType::kLstm || in[6].absent || IsZeroTensor(in[6], b->model()))) {
    return absl::OkStatus();
  }
  const int n_states = a.states_per_dir();
  for (int d = 0; d < a.D; ++d) {
    Ref states[2];
    for (int s = 0; s < n_states; ++s) {
      const Ref& src = in[5 + s];
      if (src.absent) continue;
      auto g = b->Emit1({.kind = TensorOpKind::kGather, .axis = a.state_axis()},
                        {src, Ref{.constant = Tensor::Int64({}, {d})}},
                        absl::StrCat(name, "/initial_", s == 0 ? "h" : "c", d), cls);
      if (!g.ok()) return g.status();
      states[s] = *g;
    }
    for (int s = 0; s < n_states; ++s) {
      if (!in[5 + s].absent) continue;
      // The missing one of initial_h / initial_c is zeros shaped like the other.
      auto shape = b->Emit1({.kind = TensorOpKind::kShape}, {states[1 - s]},
                            absl::StrCat(name, "/zero_state_shape", d), cls);
      if (!shape.ok()) return shape.status();
      auto z = b->Emit1({.kind = TensorOpKind::kConstantOfShape}, {*shape},
                        absl::StrCat(name, "/zero_state", d), cls);
      if (!z.ok()) return z.status();
      states[s] = *z;
    }
    for (int s = 0; s < n_states; ++s) {
      auto id = b->Materialize(states[s], absl::StrCat(name, "/state", d, "_", s));
      if (!id.ok()) return id.status();
      inputs->push_back(*id);
    }
  }
  return absl::OkStatus();
}

// The node's outputs from the layer's `outs` ([B, T, D*H], then h (and c) per direction):
// Y [B, T, D, H] (layout 0: [T, D, B, H]); Y_h, Y_c stacked to [D, B, H] ([B, D, H]).
absl::Status WireOutputs(const NodeProto& node, const RecurrentAttributes& a,
                         const std::vector<int>& outs, const std::string& name,
                         const std::string& cls, GraphBuilder* b) {
  if (node.output_size() > 0 && !node.output(0).empty()) {
    auto y = b->Emit1({.kind = TensorOpKind::kReshape},
                      {Ref{.id = outs[0]}, Ref{.constant = Tensor::Int64({4}, {0, 0, a.D, a.H})}},
                      name + "/y_split_directions", cls);  // [B, T, D, H]
    if (!y.ok()) return y.status();
    if (a.layout == 0) {
      y = b->Emit1({.kind = TensorOpKind::kTranspose, .ints = {1, 2, 0, 3}}, {*y},
                   name + "/y_time_major", cls);  // [T, D, B, H]
      if (!y.ok()) return y.status();
    }
    if (auto s = b->Bind(node.output(0), *y); !s.ok()) return s;
  }
  const int per_dir_states = a.states_per_dir();
  for (int s = 0; s < per_dir_states && s + 1 < node.output_size(); ++s) {
    if (node.output(s + 1).empty()) continue;
    std::vector<Ref> parts;
    for (int d = 0; d < a.D; ++d) {
      auto u = b->Emit1({.kind = TensorOpKind::kUnsqueeze, .ints = {a.state_axis()}},
                        {Ref{.id = outs[1 + d * per_dir_states + s]}},
                        absl::StrCat(name, "/", s == 0 ? "y_h" : "y_c", d), cls);
      if (!u.ok()) return u.status();
      parts.push_back(*u);
    }
    Ref stacked = parts[0];
    if (a.D == 2) {
      auto c = b->Emit1({.kind = TensorOpKind::kConcat, .axis = a.state_axis()}, parts,
                        absl::StrCat(name, "/", s == 0 ? "y_h" : "y_c"), cls);
      if (!c.ok()) return c.status();
      stacked = *c;
    }
    if (auto st = b->Bind(node.output(s + 1), stacked); !st.ok()) return st;
  }
  if (node.output_size() > 1 + per_dir_states) {
    return absl::InvalidArgumentError(
        absl::StrCat(a.op, " has at most ", 1 + per_dir_states, " outputs"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ImportRecurrentNode(const NodeProto& node, GraphBuilder* b) {
  const NodeAttributes attrs(node);
  std::vector<Ref> in;
  for (int i = 0; i < 8; ++i) {
    auto r = b->Resolve(i < node.input_size() ? node.input(i) : "");
    if (!r.ok()) return r.status();
    in.push_back(std::move(*r));
  }
  auto a = ReadShapeAttributes(node, attrs, in);
  if (!a.ok()) return a.status();
  auto w = ReadWeights(in, *a);
  if (!w.ok()) return w.status();
  if (auto s = ReadCellAttributes(attrs, &*a); !s.ok()) return s;
  RecurrentSpec spec = BuildSpec(node, attrs, *a, *w);

  const std::string name = node.name();
  const std::string cls = "onnx::" + a->op;
  auto x_id = WireInput(in, *a, name, cls, b);
  if (!x_id.ok()) return x_id.status();
  std::vector<int> inputs = {*x_id};
  if (auto s = WireInitialStates(in, *a, name, cls, b, &inputs); !s.ok()) return s;

  // The recurrent layer: [B, T, D*H] (or the final h), then h (and c) per direction.
  engine::Layer layer = NewLayer(name, cls);
  layer.inputs = inputs;
  const int n_out = 1 + a->D * a->states_per_dir();
  for (int i = 0; i < n_out; ++i) layer.outputs.push_back(b->NewValue());
  const std::vector<int> outs = layer.outputs;
  if (auto s = spec.Validate(name); !s.ok()) return s;
  layer.spec = std::move(spec);
  b->AddLayer(std::move(layer));
  return WireOutputs(node, *a, outs, name, cls, b);
}

}  // namespace rnnserve::models::onnx
