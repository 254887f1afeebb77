// CudnnRNNV3 in graph-only SavedModels: what Keras 3's TensorFlow backend writes for an LSTM or
// GRU when its export is traced on a GPU (keras/src/backend/tensorflow/rnn.py, _cudnn_lstm and
// _cudnn_gru). The op takes the layer's weights as one flat `params` vector in cuDNN's
// canonical order, built in the graph from the layer's variables (Split, Transpose, Reshape,
// ConcatV2); those few ops are evaluated here on the variables' values (the constant folding
// models/ may do), and the pieces are turned back into Keras's layout:
//
//   LSTM  params = W_i W_f W_c W_o  R_i R_f R_c R_o  bW_i..bW_o  bR_i..bR_o
//   GRU   params = W_r W_z W_h      R_r R_z R_h      bW_r..bW_h  bR_r..bR_h
//   each W_g [H, I] and R_g [H, H] row-major, each b [H].
//   Keras: kernel [I, G*H], recurrent_kernel [H, G*H], gates LSTM i,f,c,o, GRU z,r,h; an
//   LSTM's bias [4H] = bW + bR (cuDNN adds both inside the same sigmoid / tanh); a GRU's bias
//   [2, 3H] = [bW; bR] (cuDNN's GRU is Keras's reset_after=True).
//
// The cell is cuDNN's: tanh and sigmoid activations, zero initial states. Recognised: the op's
// `output` (return_sequences, batch-major: time_major=false, as Keras writes it) and
// Squeeze(output_h) (the last output). go_backwards (a Bidirectional's backward half) is
// ReverseSequence of the input over whole rows, and the sequence output comes back as
// ReverseV2(ReverseSequence(output)), which for whole rows is the op's output as it is: Keras's
// go_backwards order. A masked cuDNN layer feeds the op its rows' lengths from the mask and is
// refused, saying so.

#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/savedmodel/graph_layers.h"

namespace rnnserve::models::savedmodel::graph {
namespace {

constexpr int kMaxEvalDepth = 16;

std::string AttrString(const NodeDef& node, const std::string& name, const std::string& dflt) {
  auto it = node.attr().find(name);
  return it == node.attr().end() ? dflt : it->second.s();
}

// A Const node's values as floats (ints converted), with its shape.
absl::StatusOr<keras::Array> ConstArray(const NodeDef& node) {
  auto v = node.attr().find("value");
  if (v == node.attr().end() || !v->second.has_tensor()) {
    return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "' holds no value"));
  }
  const TensorProto& t = v->second.tensor();
  keras::Array a;
  int64_t n = 1;
  for (const auto& d : t.tensor_shape().dim()) {
    if (d.size() < 0 || d.size() > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "': bad shape"));
    }
    a.shape.push_back(d.size());
    n *= d.size();
    if (n > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "' is too large"));
    }
  }
  const std::string& bytes = t.tensor_content();
  if (t.dtype() == DT_FLOAT) {
    if (!bytes.empty()) {
      if (bytes.size() != static_cast<size_t>(n) * sizeof(float)) {
        return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "': bad size"));
      }
      a.data.resize(n);
      std::memcpy(a.data.data(), bytes.data(), bytes.size());
    } else {
      a.data.assign(t.float_val().begin(), t.float_val().end());
    }
  } else if (t.dtype() == DT_INT32) {
    if (!bytes.empty()) {
      if (bytes.size() != static_cast<size_t>(n) * sizeof(int32_t)) {
        return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "': bad size"));
      }
      for (int64_t i = 0; i < n; ++i) {
        int32_t x;
        std::memcpy(&x, bytes.data() + i * sizeof(x), sizeof(x));
        a.data.push_back(static_cast<float>(x));
      }
    } else {
      for (int32_t x : t.int_val()) a.data.push_back(static_cast<float>(x));
    }
  } else if (t.dtype() == DT_INT64) {
    if (!bytes.empty()) {
      if (bytes.size() != static_cast<size_t>(n) * sizeof(int64_t)) {
        return absl::InvalidArgumentError(absl::StrCat("constant '", node.name(), "': bad size"));
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t x;
        std::memcpy(&x, bytes.data() + i * sizeof(x), sizeof(x));
        a.data.push_back(static_cast<float>(x));
      }
    } else {
      for (int64_t x : t.int64_val()) a.data.push_back(static_cast<float>(x));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("constant '", node.name(), "' is not float or int"));
  }
  if (a.size() == 1 && n > 1) a.data.assign(n, a.data[0]);  // one value fills the tensor
  if (a.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("constant '", node.name(), "': ", a.size(), " values for ", n, " elements"));
  }
  return a;
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<keras::Array> Recogniser::Evaluate(const Source& s, int depth) {
  if (depth > kMaxEvalDepth) return Error("cuDNN params computed too deep");
  if (s.kind == Source::Kind::kObject) {
    auto v = Variable(s.index);
    if (!v.ok()) return v.status();
    return std::move(v->second);
  }
  if (s.kind == Source::Kind::kModelInput) return Error("cuDNN params computed from an input");
  const NodeDef& n = *s.node;
  auto in = [&](int i) -> absl::StatusOr<keras::Array> {
    auto t = graph_.TraceInput(*s.frame, n, i);
    if (!t.ok()) return t.status();
    return Evaluate(*t, depth + 1);
  };
  auto bad = [&](const std::string& what) {
    return Error(absl::StrCat("cuDNN params: '", n.name(), "' (", n.op(), "): ", what));
  };
  if (n.op() == "Const") {
    auto a = ConstArray(n);
    if (!a.ok()) return Error(a.status().message());
    return a;
  }
  if (n.op() == "Identity") return in(0);
  if (n.op() == "ZerosLike") {
    auto x = in(0);
    if (!x.ok()) return x.status();
    std::fill(x->data.begin(), x->data.end(), 0.0f);
    return x;
  }
  if (n.op() == "Reshape") {
    auto x = in(0);
    auto shape = in(1);
    if (!x.ok()) return x.status();
    if (!shape.ok()) return shape.status();
    std::vector<int64_t> dims;
    int free = -1;
    int64_t known = 1;
    for (float d : shape->data) {
      if (d == -1 && free < 0) {
        free = static_cast<int>(dims.size());
        dims.push_back(1);
      } else if (d < 0) {
        return bad("a shape with more than one -1");
      } else {
        dims.push_back(static_cast<int64_t>(d));
        known *= static_cast<int64_t>(d);
      }
    }
    if (free >= 0) {
      if (known == 0 || x->size() % known != 0) return bad("a shape that does not fit");
      dims[free] = x->size() / known;
    }
    if (Count(dims) != x->size()) return bad("a shape that does not fit");
    x->shape = dims;
    return x;
  }
  if (n.op() == "Transpose") {
    auto x = in(0);
    auto perm = in(1);
    if (!x.ok()) return x.status();
    if (!perm.ok()) return perm.status();
    if (x->shape.size() != 2 || perm->data != std::vector<float>{1, 0}) {
      return bad("not a 2-D transpose");
    }
    const int64_t r = x->shape[0], c = x->shape[1];
    keras::Array t{{c, r}, std::vector<float>(x->data.size())};
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j) t.data[j * r + i] = x->data[i * c + j];
    }
    return t;
  }
  if (n.op() == "Split") {
    auto axis_a = in(0);
    auto x = in(1);
    if (!axis_a.ok()) return axis_a.status();
    if (!x.ok()) return x.status();
    auto num = n.attr().find("num_split");
    const int64_t parts = num == n.attr().end() ? 0 : num->second.i();
    const int rank = static_cast<int>(x->shape.size());
    int axis = axis_a->data.size() == 1 ? static_cast<int>(axis_a->data[0]) : -99;
    if (axis < 0) axis += rank;
    if (rank < 1 || rank > 2 || axis < 0 || axis >= rank || parts <= 0 ||
        x->shape[axis] % parts != 0 || s.output < 0 || s.output >= parts) {
      return bad("not an even split of a 1-D or 2-D value");
    }
    const int64_t rows = rank == 2 ? x->shape[0] : 1;
    const int64_t cols = x->shape[rank - 1];
    const int64_t step = x->shape[axis] / parts;
    keras::Array out;
    out.shape = x->shape;
    out.shape[axis] = step;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t along = axis == rank - 1 ? j : i;
        if (along / step == s.output) out.data.push_back(x->data[i * cols + j]);
      }
    }
    return out;
  }
  if (n.op() == "ConcatV2") {
    int count = 0;
    for (const std::string& i : n.input()) count += !i.empty() && i[0] != '^';
    auto axis = in(count - 1);
    if (!axis.ok()) return axis.status();
    if (axis->data.size() != 1 || (axis->data[0] != 0 && axis->data[0] != -1)) {
      return bad("a concat along an axis other than the first");
    }
    keras::Array out;
    for (int i = 0; i + 1 < count; ++i) {
      auto x = in(i);
      if (!x.ok()) return x.status();
      if (x->shape.size() != 1 || (axis->data[0] == -1 && out.shape.size() > 1)) {
        return bad("a concat of values that are not 1-D");
      }
      out.data.insert(out.data.end(), x->data.begin(), x->data.end());
    }
    out.shape = {out.size()};
    return out;
  }
  return Unsupported(n.op(), n.name());
}

absl::StatusOr<RnnFound> Recogniser::CudnnRnn(const Source& op, bool return_sequences) {
  const NodeDef& node = *op.node;
  const std::string mode = AttrString(node, "rnn_mode", "lstm");
  if (node.op() != "CudnnRNNV3" || (mode != "lstm" && mode != "gru") ||
      AttrString(node, "input_mode", "linear_input") != "linear_input" ||
      AttrString(node, "direction", "unidirectional") != "unidirectional") {
    return Unsupported(absl::StrCat(node.op(), " (rnn_mode ", mode, ")"), node.name());
  }
  auto tm = node.attr().find("time_major");
  if (tm == node.attr().end() || tm->second.b()) {
    return Unsupported(absl::StrCat(node.op(), " (time_major)"), node.name());
  }
  if (auto p = node.attr().find("num_proj"); p != node.attr().end() && p->second.i() != 0) {
    return Unsupported(absl::StrCat(node.op(), " (num_proj)"), node.name());
  }
  // Sequence lengths: Fill(batch, T), every row whole; a mask's lengths are refused.
  auto lengths = graph_.TraceInput(*op.frame, node, 4);
  if (!lengths.ok()) return lengths.status();
  if (lengths->kind != Source::Kind::kNode || lengths->node->op() != "Fill") {
    return Unsupported(absl::StrCat(node.op(), " (sequence_lengths from a mask)"), node.name());
  }
  // Zero initial states: ExpandDims(Fill(shape, 0)).
  for (int i = 1; i <= (mode == "lstm" ? 2 : 1); ++i) {
    auto h = graph_.TraceInput(*op.frame, node, i);
    if (!h.ok()) return h.status();
    if (h->kind == Source::Kind::kNode && h->node->op() == "ExpandDims") {
      h = graph_.TraceInput(*h->frame, *h->node, 0);
      if (!h.ok()) return h.status();
    }
    if (h->kind != Source::Kind::kNode || h->node->op() != "Fill" ||
        ScalarConst(*h->frame, *h->node, 1).value_or(1.0f) != 0.0f) {
      return Error(absl::StrCat("'", node.name(), "' starts from a state that is not zeros"));
    }
  }
  Value x{op.frame, ""};
  if (auto in = FunctionGraph::Input(node, 0); in.ok()) {
    x.name = *in;
  } else {
    return in.status();
  }
  // go_backwards: ReverseSequence(x, lengths) over the batch-major time axis, whole rows.
  bool go_backwards = false;
  auto in0 = graph_.TraceInput(*op.frame, node, 0);
  if (!in0.ok()) return in0.status();
  if (in0->kind == Source::Kind::kNode && in0->node->op() == "ReverseSequence") {
    const NodeDef& rev = *in0->node;
    auto seq = rev.attr().find("seq_dim");
    auto batch = rev.attr().find("batch_dim");
    auto rows = graph_.TraceInput(*in0->frame, rev, 1);
    if (!rows.ok()) return rows.status();
    if (seq == rev.attr().end() || seq->second.i() != 1 ||
        (batch != rev.attr().end() && batch->second.i() != 0) ||
        rows->kind != Source::Kind::kNode || rows->node->op() != "Fill") {
      return Unsupported("ReverseSequence (of a masked or time-major cuDNN layer)", rev.name());
    }
    auto in = FunctionGraph::Input(rev, 0);
    if (!in.ok()) return in.status();
    x = Value{in0->frame, *in};
    go_backwards = true;
  }

  // params: ConcatV2 of cuDNN's 4G pieces.
  const int G = mode == "lstm" ? 4 : 3;
  auto params = graph_.TraceInput(*op.frame, node, 3);
  if (!params.ok()) return params.status();
  if (params->kind != Source::Kind::kNode || params->node->op() != "ConcatV2") {
    return Error(absl::StrCat("the params of '", node.name(), "' are not a ConcatV2 of pieces"));
  }
  int count = 0;
  for (const std::string& i : params->node->input()) count += !i.empty() && i[0] != '^';
  if (count != 4 * G + 1) {
    return Error(
        absl::StrCat("the params of '", node.name(), "' have ", count - 1, " pieces, not ", 4 * G));
  }
  std::vector<keras::Array> pieces;
  for (int i = 0; i < 4 * G; ++i) {
    auto src = graph_.TraceInput(*params->frame, *params->node, i);
    if (!src.ok()) return src.status();
    auto a = Evaluate(*src, 0);
    if (!a.ok()) return a.status();
    pieces.push_back(std::move(*a));
  }
  const int64_t H = pieces[2 * G].size();
  if (H <= 0 || pieces[0].size() % H != 0) return Error("cuDNN params of unexpected sizes");
  const int64_t I = pieces[0].size() / H;
  for (int g = 0; g < G; ++g) {
    if (pieces[g].size() != H * I || pieces[G + g].size() != H * H ||
        pieces[2 * G + g].size() != H || pieces[3 * G + g].size() != H) {
      return Error(absl::StrCat("the params of '", node.name(), "' are not cuDNN's ", mode,
                                " layout for H=", H, ", I=", I));
    }
  }
  // Keras gate k is cuDNN gate order[k].
  const std::vector<int> order = mode == "lstm" ? std::vector<int>{0, 1, 2, 3}  // i f c o
                                                : std::vector<int>{1, 0, 2};    // z r h
  keras::Array kernel{{I, G * H}, std::vector<float>(I * G * H)};
  keras::Array recurrent{{H, G * H}, std::vector<float>(H * G * H)};
  keras::Array bias;
  if (mode == "lstm") {
    bias = {{G * H}, std::vector<float>(G * H)};
  } else {
    bias = {{2, G * H}, std::vector<float>(2 * G * H)};
  }
  for (int k = 0; k < G; ++k) {
    const int c = order[k];
    const keras::Array& w = pieces[c];      // [H, I]
    const keras::Array& r = pieces[G + c];  // [H, H]
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < I; ++i) kernel.data[i * G * H + k * H + h] = w.data[h * I + i];
      for (int64_t j = 0; j < H; ++j) recurrent.data[j * G * H + k * H + h] = r.data[h * H + j];
      const float bw = pieces[2 * G + c].data[h];
      const float br = pieces[3 * G + c].data[h];
      if (mode == "lstm") {
        bias.data[k * H + h] = bw + br;
      } else {
        bias.data[k * H + h] = bw;
        bias.data[G * H + k * H + h] = br;
      }
    }
  }
  Json config = {{"units", H},
                 {"return_sequences", return_sequences},
                 {"go_backwards", go_backwards},
                 {"use_bias", true},
                 {"activation", "tanh"},
                 {"recurrent_activation", "sigmoid"}};
  if (mode == "gru") config["reset_after"] = true;
  RnnFound found;
  found.layer = {Json{{"class_name", mode == "lstm" ? "LSTM" : "GRU"}, {"config", config}},
                 {std::move(kernel), std::move(recurrent), std::move(bias)}};
  found.x = x;
  return found;
}

}  // namespace rnnserve::models::savedmodel::graph
