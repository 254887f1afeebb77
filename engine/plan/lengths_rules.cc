#include "engine/plan/lengths_rules.h"

#include <algorithm>
#include <optional>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace rnnserve::engine::plan {
namespace {

using Kind = SeqInfo::Kind;

constexpr int64_t kOpenEnd = int64_t{1} << 30;  // Slice ends at or past this run to the end

// A possibly negative axis in [0, rank), or -1.
int Norm(int64_t axis, int rank) {
  if (rank < 0) return -1;
  const int64_t a = axis < 0 ? axis + rank : axis;
  return a >= 0 && a < rank ? static_cast<int>(a) : -1;
}

OpVerdict One(SeqInfo info) { return {.outs = {std::move(info)}}; }
OpVerdict Mixes(std::string why) { return {.outs = {SeqInfo::Mixed()}, .mixes = std::move(why)}; }

// The int elements of an operand: a constant's values or a shape vector's tags.
std::optional<std::vector<int64_t>> IntsOf(const SeqInfo* s) {
  if (s == nullptr || !s->ints_known) return std::nullopt;
  return s->ints;
}

bool AnyTime(const std::vector<int64_t>& v) {
  return std::any_of(v.begin(), v.end(), MayDependOnTime);
}

// A shape vector of `v`, or exact when none of its elements is B or depends on T.
SeqInfo ShapeOf(std::vector<int64_t> v) {
  SeqInfo s;
  s.rank = 1;
  s.kind = AnyTime(v) || std::count(v.begin(), v.end(), kTagBatch) ? Kind::kShape : Kind::kExact;
  s.ints = std::move(v);
  s.ints_known = true;
  return s;
}

SeqInfo UnknownShape() { return {.kind = Kind::kShape, .rank = 1}; }

// Index of `tag` in v when it occurs exactly once, else -1.
int OnlyAt(const std::vector<int64_t>& v, int64_t tag) {
  if (std::count(v.begin(), v.end(), tag) != 1) return -1;
  return static_cast<int>(std::find(v.begin(), v.end(), tag) - v.begin());
}

// A value shaped by `shape` (ConstantOfShape, or Expand of an exact value): a sequence when the
// shape holds B and T once each and nothing else computed from T; exact without T.
OpVerdict FromShape(const std::vector<int64_t>& shape, const char* what) {
  const int rank = static_cast<int>(shape.size());
  if (!AnyTime(shape)) return One(SeqInfo::Exact(rank));
  const int b = OnlyAt(shape, kTagBatch), t = OnlyAt(shape, kTagTime);
  const bool only_t = std::count_if(shape.begin(), shape.end(), MayDependOnTime) == 1;
  if (b < 0 || t < 0 || !only_t) {
    return Mixes(absl::StrCat(what, " a shape computed from the padded length"));
  }
  return One(SeqInfo::Steps(rank, b, t));
}

// Elementwise ops with numpy broadcasting.
OpVerdict Broadcast(const std::vector<const SeqInfo*>& in) {
  bool shape = false, steps = false;
  int rank = 0;
  for (const SeqInfo* s : in) {
    if (s == nullptr) continue;
    shape |= s->kind == Kind::kShape;
    steps |= s->steps();
    if (s->rank < 0) rank = -1;
    if (rank >= 0) rank = std::max(rank, s->rank);
  }
  if (shape && steps) return Mixes("mixes a shape computed from the padded length with data");
  if (shape) {  // shape arithmetic
    bool time = false;
    for (const SeqInfo* s : in) {
      if (s != nullptr && (s->kind == Kind::kShape && (!s->ints_known || AnyTime(s->ints)))) {
        time = true;
      }
    }
    if (!time) return One(SeqInfo::Exact(1));
    SeqInfo out = UnknownShape();
    out.ints = {kTagFromT};  // a scalar or vector computed from T: conservatively one element
    out.ints_known = false;
    return One(out);
  }
  if (!steps) return One(SeqInfo::Exact(rank));
  if (rank < 0) return Mixes("broadcasts with an operand of unknown rank");
  SeqInfo out;
  for (const SeqInfo* s : in) {
    if (s == nullptr || !s->steps()) continue;
    const int shift = rank - s->rank;
    SeqInfo here = SeqInfo::Steps(rank, s->batch + shift, s->time + shift);
    if (out.steps() && (out.batch != here.batch || out.time != here.time)) {
      return Mixes("combines sequences whose batch and time axes do not line up");
    }
    out = here;
  }
  return One(out);
}

// Axes kept by removing `removed` (sorted or not) from `rank` axes: the new index of `axis`.
int AfterRemoving(int axis, const std::vector<int>& removed) {
  int shift = 0;
  for (int r : removed) shift += r < axis;
  return axis - shift;
}

OpVerdict Unsqueeze(const SeqInfo& x, const std::vector<int64_t>& axes) {
  const int rank = x.rank < 0 ? -1 : x.rank + static_cast<int>(axes.size());
  if (!x.steps()) {
    if (x.kind == Kind::kShape) {
      SeqInfo s = x;
      s.rank = rank;
      return One(s);
    }
    return One(SeqInfo::Exact(rank));
  }
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    const int n = Norm(a, rank);
    if (n < 0) return Mixes("unsqueezes an axis out of range");
    inserted[n] = true;
  }
  std::vector<int> old_to_new;
  for (int i = 0; i < rank; ++i) {
    if (!inserted[i]) old_to_new.push_back(i);
  }
  return One(SeqInfo::Steps(rank, old_to_new[x.batch], old_to_new[x.time]));
}

OpVerdict Squeeze(const SeqInfo& x, const std::vector<int64_t>& axes) {
  if (!x.steps()) {
    if (x.kind == Kind::kShape) return One(x);
    return One(SeqInfo::Exact(x.rank < 0 || axes.empty() ? -1 : x.rank - int(axes.size())));
  }
  if (axes.empty()) return Mixes("squeezes without naming its axes");
  std::vector<int> removed;
  for (int64_t a : axes) {
    const int n = Norm(a, x.rank);
    if (n < 0) return Mixes("squeezes an axis out of range");
    if (n == x.batch || n == x.time) return Mixes("squeezes the batch or time axis");
    removed.push_back(n);
  }
  return One(SeqInfo::Steps(x.rank - static_cast<int>(removed.size()),
                            AfterRemoving(x.batch, removed), AfterRemoving(x.time, removed)));
}

OpVerdict Gather(const TensorOpSpec& spec, const SeqInfo& data, const SeqInfo* idx) {
  if (idx == nullptr) return Mixes("has no indices");
  if (data.kind == Kind::kShape) {
    auto v = IntsOf(idx);
    if (!data.ints_known || !v) return One(UnknownShape());
    std::vector<int64_t> picked;
    const int64_t n = static_cast<int64_t>(data.ints.size());
    for (int64_t i : *v) {
      const int64_t j = i < 0 ? i + n : i;
      picked.push_back(j >= 0 && j < n ? data.ints[j] : kTagUnknown);
    }
    SeqInfo out = ShapeOf(std::move(picked));
    out.rank = idx->rank;
    return One(out);
  }
  if (idx->steps()) {  // an embedding lookup: a table's rows picked by token ids
    if (!data.exact() || data.rank < 0) return Mixes("gathers with sequence indices");
    const int axis = Norm(spec.axis, data.rank);
    if (axis < 0) return Mixes("gathers along an axis out of range");
    return One(SeqInfo::Steps(data.rank - 1 + idx->rank, idx->batch + axis, idx->time + axis));
  }
  if (!data.steps()) return One(SeqInfo::Exact());
  const int axis = Norm(spec.axis, data.rank);
  if (axis < 0 || idx->rank < 0) return Mixes("gathers along an axis it cannot place");
  if (axis == data.batch) return Mixes("gathers along the batch axis");
  if (axis == data.time) {
    auto v = IntsOf(idx);
    if (!v || v->size() != 1 || idx->rank > 1) {
      return Mixes("gathers time steps other than the first or the last");
    }
    if ((*v)[0] == 0) return One(SeqInfo::Exact(data.rank - 1 + idx->rank));
    if ((*v)[0] != -1) {
      return Mixes(absl::StrCat("reads time step ", (*v)[0], " (only the first or the last)"));
    }
    OpVerdict last = One(SeqInfo::Exact(data.rank - 1 + idx->rank));
    last.last_step = true;
    last.keep_dims = idx->rank == 1;
    last.batch = data.batch;
    last.time = data.time;
    return last;
  }
  auto place = [&](int a) { return a < axis ? a : a - 1 + idx->rank; };
  return One(SeqInfo::Steps(data.rank - 1 + idx->rank, place(data.batch), place(data.time)));
}

OpVerdict Slice(const SeqInfo& data, const std::vector<const SeqInfo*>& in) {
  auto starts = IntsOf(in.size() > 1 ? in[1] : nullptr);
  auto ends = IntsOf(in.size() > 2 ? in[2] : nullptr);
  std::optional<std::vector<int64_t>> axes, steps;
  if (in.size() > 3 && in[3] != nullptr) axes = IntsOf(in[3]);
  if (in.size() > 4 && in[4] != nullptr) steps = IntsOf(in[4]);
  const bool known = starts && ends && (in.size() <= 3 || in[3] == nullptr || axes) &&
                     (in.size() <= 4 || in[4] == nullptr || steps);
  if (data.kind == Kind::kShape) {
    if (!known || !data.ints_known || starts->size() != 1 || (steps && (*steps)[0] != 1)) {
      return One(UnknownShape());
    }
    const int64_t n = static_cast<int64_t>(data.ints.size());
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    const int64_t s = clamp((*starts)[0]), e = clamp((*ends)[0]);
    return One(
        ShapeOf(std::vector<int64_t>(data.ints.begin() + s, data.ints.begin() + std::max(s, e))));
  }
  if (!data.steps()) return One(SeqInfo::Exact(data.rank));
  if (!known || starts->size() != ends->size()) return Mixes("slices with runtime bounds");
  bool last = false;
  for (size_t k = 0; k < starts->size(); ++k) {
    const int axis = Norm(axes ? (*axes)[k] : static_cast<int64_t>(k), data.rank);
    const int64_t step = steps ? (*steps)[k] : 1;
    const int64_t s = (*starts)[k], e = (*ends)[k];
    const bool whole = step == 1 && s == 0 && e >= kOpenEnd;
    if (axis < 0) return Mixes("slices an axis out of range");
    if (axis == data.batch && !whole) return Mixes("slices the batch axis");
    if (axis == data.time && !whole) {
      if (step != 1 || s != -1 || e < kOpenEnd || starts->size() != 1) {
        return Mixes("slices the time axis other than to its last step");
      }
      last = true;
    }
  }
  if (!last) return One(SeqInfo::Steps(data.rank, data.batch, data.time));
  OpVerdict v = One(SeqInfo::Exact(data.rank));
  v.last_step = v.keep_dims = true;
  v.batch = data.batch;
  v.time = data.time;
  return v;
}

OpVerdict Reshape(const TensorOpSpec& spec, const SeqInfo& data, const SeqInfo* shape_in) {
  auto shape = IntsOf(shape_in);
  if (!data.steps()) {
    if (!shape) return One(data.kind == Kind::kShape ? UnknownShape() : SeqInfo::Exact());
    if (data.kind == Kind::kShape) return One(shape->size() == 1 ? data : UnknownShape());
    if (AnyTime(*shape)) return Mixes("reshapes to a shape computed from the padded length");
    return One(SeqInfo::Exact(static_cast<int>(shape->size())));
  }
  if (!shape) return Mixes("reshapes to a shape it computes at run time");
  // Every axis up to the batch and time axes is copied as it is; later ones may be merged.
  const int last = std::max(data.batch, data.time);
  if (static_cast<int>(shape->size()) <= last) return Mixes("reshapes the batch or time axis");
  for (int p = 0; p <= last; ++p) {
    const int64_t v = (*shape)[p];
    const bool copy = (v == 0 && !spec.allow_zero) || (p == data.batch && v == kTagBatch) ||
                      (p == data.time && v == kTagTime);
    if (!copy) return Mixes("reshapes the batch or time axis");
  }
  for (size_t p = last + 1; p < shape->size(); ++p) {
    if (MayDependOnTime((*shape)[p])) return Mixes("reshapes the time axis into another");
  }
  return One(SeqInfo::Steps(static_cast<int>(shape->size()), data.batch, data.time));
}

OpVerdict Expand(const SeqInfo& data, const SeqInfo* shape_in) {
  auto shape = IntsOf(shape_in);
  if (!shape) {
    return data.steps() ? Mixes("expands to a shape it computes at run time")
                        : One(SeqInfo::Exact());
  }
  if (data.kind == Kind::kShape) return One(UnknownShape());
  if (!data.steps()) return FromShape(*shape, "expands to");
  if (data.rank < 0) return Mixes("expands a value of unknown rank");
  const int rank = std::max<int>(data.rank, static_cast<int>(shape->size()));
  const int shift = rank - data.rank, lead = rank - static_cast<int>(shape->size());
  const int b = data.batch + shift, t = data.time + shift;
  for (int p = lead; p < rank; ++p) {
    if (p != t && MayDependOnTime((*shape)[p - lead])) {
      return Mixes("expands another axis to the padded length");
    }
  }
  return One(SeqInfo::Steps(rank, b, t));
}

OpVerdict Reduce(const TensorOpSpec& spec, const SeqInfo& x) {
  if (!x.steps()) return One(x.kind == Kind::kShape ? UnknownShape() : SeqInfo::Exact());
  if (spec.ints.empty()) return Mixes("reduces over every axis, time included");
  std::vector<int> removed;
  for (int64_t a : spec.ints) {
    const int n = Norm(a, x.rank);
    if (n == x.time) return Mixes("reduces over the time axis");
    if (n == x.batch || n < 0) return Mixes("reduces over the batch axis");
    removed.push_back(n);
  }
  if (spec.keep_dims) return One(x);
  return One(SeqInfo::Steps(x.rank - static_cast<int>(removed.size()),
                            AfterRemoving(x.batch, removed), AfterRemoving(x.time, removed)));
}

OpVerdict Concat(const TensorOpSpec& spec, const std::vector<const SeqInfo*>& in) {
  bool shape = false, steps = false;
  for (const SeqInfo* s : in) {
    if (s == nullptr) continue;
    if (s->kind == Kind::kMixed) return One(SeqInfo::Mixed());
    shape |= s->kind == Kind::kShape;
    steps |= s->steps();
  }
  if (shape && steps) return Mixes("mixes a shape computed from the padded length with data");
  if (shape) {
    std::vector<int64_t> all;
    for (const SeqInfo* s : in) {
      if (s == nullptr) continue;
      if (!s->ints_known) return One(UnknownShape());
      all.insert(all.end(), s->ints.begin(), s->ints.end());
    }
    return One(ShapeOf(std::move(all)));
  }
  if (!steps) {
    // Shape vectors of constants only: keep their values for later shape ops.
    std::vector<int64_t> all;
    bool known = true;
    for (const SeqInfo* s : in) {
      if (s == nullptr) continue;
      known &= s->ints_known && s->rank == 1;
      if (known) all.insert(all.end(), s->ints.begin(), s->ints.end());
    }
    return One(known ? ShapeOf(std::move(all)) : SeqInfo::Exact(in[0] ? in[0]->rank : -1));
  }
  SeqInfo out;
  for (const SeqInfo* s : in) {
    if (s == nullptr || !s->steps()) continue;
    if (out.steps() && (out.batch != s->batch || out.time != s->time || out.rank != s->rank)) {
      return Mixes("concatenates sequences whose batch and time axes do not line up");
    }
    out = SeqInfo::Steps(s->rank, s->batch, s->time);
  }
  const int axis = Norm(spec.axis, out.rank);
  if (axis == out.time) return Mixes("concatenates along the time axis");
  if (axis == out.batch || axis < 0) return Mixes("concatenates along the batch axis");
  return One(out);
}

OpVerdict MatMul(const SeqInfo& a, const SeqInfo& b) {
  if (b.steps()) return Mixes("multiplies by a sequence (the steps mix)");
  if (!a.steps()) {
    return One(a.kind == Kind::kShape || b.kind == Kind::kShape ? UnknownShape()
                                                                : SeqInfo::Exact());
  }
  if (b.rank != 1 && b.rank != 2) return Mixes("multiplies by a batch of matrices");
  const int k = a.rank - 1;  // the contracted axis
  if (k == a.time || k == a.batch) return Mixes("multiplies along the batch or time axis");
  return One(SeqInfo::Steps(b.rank == 1 ? a.rank - 1 : a.rank, a.batch, a.time));
}

OpVerdict Softmax(const TensorOpSpec& spec, const SeqInfo& x) {
  if (!x.steps()) return One(SeqInfo::Exact(x.rank));
  const int axis = Norm(spec.axis, x.rank);
  const bool over =
      spec.coerce_2d ? (x.time >= axis || x.batch >= axis) : (axis == x.time || axis == x.batch);
  if (axis < 0 || over) return Mixes("normalises over the time or batch axis");
  return One(x);
}

}  // namespace

OpVerdict ClassifyTensorOp(const TensorOpSpec& spec, const std::vector<const SeqInfo*>& in,
                           int num_outputs) {
  for (const SeqInfo* s : in) {
    if (s != nullptr && s->kind == Kind::kMixed) {
      return {.outs = std::vector<SeqInfo>(std::max(num_outputs, 1), SeqInfo::Mixed())};
    }
  }
  static const SeqInfo kAbsent = SeqInfo::Exact();
  const SeqInfo& x = in.empty() || in[0] == nullptr ? kAbsent : *in[0];
  const SeqInfo* second = in.size() > 1 ? in[1] : nullptr;
  auto axes_of = [&]() -> std::optional<std::vector<int64_t>> {
    if (second == nullptr) return spec.ints;
    return IntsOf(second);
  };
  switch (spec.kind) {
    case TensorOpKind::kConstant:
      return One(x);
    case TensorOpKind::kShape: {
      if (!x.steps()) return One(SeqInfo::Exact(1));
      std::vector<int64_t> tags(x.rank, kTagOther);
      tags[x.batch] = kTagBatch;
      tags[x.time] = kTagTime;
      return One(ShapeOf(std::move(tags)));
    }
    case TensorOpKind::kGather:
      return Gather(spec, x, second);
    case TensorOpKind::kConcat:
      return Concat(spec, in);
    case TensorOpKind::kUnsqueeze:
    case TensorOpKind::kSqueeze: {
      auto axes = axes_of();
      if (!axes) return x.steps() ? Mixes("squeezes axes it computes at run time") : One(x);
      return spec.kind == TensorOpKind::kUnsqueeze ? Unsqueeze(x, *axes) : Squeeze(x, *axes);
    }
    case TensorOpKind::kSlice:
      return Slice(x, in);
    case TensorOpKind::kTranspose: {
      if (!x.steps()) return One(x);
      std::vector<int64_t> perm = spec.ints;
      if (perm.empty()) {
        for (int i = x.rank - 1; i >= 0; --i) perm.push_back(i);
      }
      if (static_cast<int>(perm.size()) != x.rank) return Mixes("transposes with a bad perm");
      const int b = static_cast<int>(std::find(perm.begin(), perm.end(), x.batch) - perm.begin());
      const int t = static_cast<int>(std::find(perm.begin(), perm.end(), x.time) - perm.begin());
      return One(SeqInfo::Steps(x.rank, b, t));
    }
    case TensorOpKind::kReshape:
      return Reshape(spec, x, second);
    case TensorOpKind::kExpand:
      return Expand(x, second);
    case TensorOpKind::kCast: {
      SeqInfo out = x;
      out.native = false;
      return One(out);
    }
    case TensorOpKind::kConstantOfShape: {
      auto shape = IntsOf(&x);
      if (!shape) {
        return x.kind == Kind::kShape ? Mixes("fills a shape computed from the padded length")
                                      : One(SeqInfo::Exact());
      }
      return FromShape(*shape, "fills");
    }
    case TensorOpKind::kAdd:
    case TensorOpKind::kSub:
    case TensorOpKind::kMul:
    case TensorOpKind::kDiv:
    case TensorOpKind::kPow:
    case TensorOpKind::kMin:
    case TensorOpKind::kMax:
      return Broadcast(in);
    case TensorOpKind::kMatMul:
      return MatMul(x, second ? *second : kAbsent);
    case TensorOpKind::kGemm:
      for (const SeqInfo* s : in) {
        if (s != nullptr && s->steps()) return Mixes("multiplies along the batch or time axis");
      }
      return One(SeqInfo::Exact(2));
    case TensorOpKind::kActivation:
    case TensorOpKind::kNeg:
    case TensorOpKind::kAbs:
    case TensorOpKind::kSqrt:
    case TensorOpKind::kExp:
    case TensorOpKind::kLog:
    case TensorOpKind::kReciprocal:
      return Broadcast({&x});
    case TensorOpKind::kSoftmax:
    case TensorOpKind::kLogSoftmax:
      return Softmax(spec, x);
    case TensorOpKind::kFlatten:
      if (x.steps()) return Mixes("flattens the batch or time axis into another");
      return One(x.kind == Kind::kShape ? UnknownShape() : SeqInfo::Exact(2));
    case TensorOpKind::kSplit: {
      if (x.steps()) {
        const int axis = Norm(spec.axis, x.rank);
        if (axis == x.time || axis == x.batch || axis < 0) {
          return Mixes("splits along the batch or time axis");
        }
      }
      SeqInfo each = x.steps()                ? SeqInfo::Steps(x.rank, x.batch, x.time)
                     : x.kind == Kind::kShape ? UnknownShape()
                                              : SeqInfo::Exact(x.rank);
      return {.outs = std::vector<SeqInfo>(std::max(num_outputs, 1), each)};
    }
    case TensorOpKind::kReduceMean:
    case TensorOpKind::kReduceSum:
    case TensorOpKind::kReduceMax:
      return Reduce(spec, x);
    case TensorOpKind::kRange:
      for (const SeqInfo* s : in) {
        if (s != nullptr && s->kind != Kind::kExact) {
          return Mixes("counts up to a length computed from the padded length");
        }
      }
      return One(SeqInfo::Exact(1));
    case TensorOpKind::kAttachLengths:
      // The graph's own sequence_lens: not the request's lengths.
      return One(x.steps() ? SeqInfo::Steps(x.rank, x.batch, x.time) : x);
    case TensorOpKind::kAttachRequestLengths:
      return One(x.steps() ? SeqInfo::Steps(x.rank, x.batch, x.time, /*native=*/true) : x);
    case TensorOpKind::kGatherAtLengths:
      return One(SeqInfo::Exact(x.rank < 0 ? -1 : x.rank - (spec.keep_dims ? 0 : 1)));
    case TensorOpKind::kZeroPastLengths:
      return One(x.steps() ? SeqInfo::Steps(x.rank, x.batch, x.time) : x);
  }
  return Mixes("is an op these rules do not know");
}

OpVerdict ClassifyLayer(const LayerSpec& spec, const std::vector<const SeqInfo*>& in) {
  for (const SeqInfo* s : in) {
    if (s != nullptr && s->kind == Kind::kMixed) return One(SeqInfo::Mixed());
  }
  if (in.empty() || in[0] == nullptr) return One(SeqInfo::Exact());
  const SeqInfo& x = *in[0];
  return std::visit(
      [&](const auto& s) -> OpVerdict {
        using S = std::decay_t<decltype(s)>;
        // Layers over the last axis keep a sequence (and the Keras mask the engines carry).
        if constexpr (std::is_same_v<S, DenseSpec> || std::is_same_v<S, ActivationSpec> ||
                      std::is_same_v<S, IdentitySpec> || std::is_same_v<S, BatchNormSpec> ||
                      std::is_same_v<S, LayerNormSpec>) {
          if (x.steps() && x.rank - 1 == x.time) return Mixes("works across the time axis");
          return One(x);
        } else if constexpr (std::is_same_v<S, SoftmaxSpec>) {
          return Softmax({.kind = TensorOpKind::kSoftmax, .axis = s.axis}, x);
        } else if constexpr (std::is_same_v<S, MaskingSpec>) {
          return One(x);
        } else if constexpr (std::is_same_v<S, EmbeddingSpec>) {
          if (!x.steps()) return One(SeqInfo::Exact(x.rank < 0 ? -1 : x.rank + 1));
          return One(SeqInfo::Steps(x.rank + 1, x.batch, x.time, x.native));
        } else if constexpr (std::is_same_v<S, GlobalPool1DSpec>) {
          // Keras pools only the steps its mask keeps.
          return One(SeqInfo::Exact(2));
        } else if constexpr (std::is_same_v<S, Conv1DSpec> || std::is_same_v<S, Pool1DSpec>) {
          if (x.steps()) return Mixes("convolves or pools over the time axis");
          return One(SeqInfo::Exact(3));
        } else if constexpr (std::is_same_v<S, FlattenSpec> || std::is_same_v<S, ReshapeSpec>) {
          if (x.steps()) return Mixes("reshapes the time axis into another");
          return One(SeqInfo::Exact());
        } else if constexpr (std::is_same_v<S, RepeatVectorSpec>) {
          if (x.steps()) return Mixes("repeats a sequence");
          return One(SeqInfo::Exact(3));
        } else if constexpr (std::is_same_v<S, MergeSpec>) {
          SeqInfo out = SeqInfo::Exact(x.rank);
          for (const SeqInfo* v : in) {
            if (v == nullptr || !v->steps()) continue;
            if (out.steps() && (out.batch != v->batch || out.time != v->time)) {
              return Mixes("merges sequences whose axes do not line up");
            }
            const bool native = out.native || v->native;
            out = *v;
            out.native = native;
          }
          if (out.steps() && s.kind == MergeSpec::Kind::kConcatenate &&
              Norm(s.axis, out.rank) == out.time) {
            return Mixes("concatenates along the time axis");
          }
          return One(out);
        } else {
          if (x.steps()) return Mixes("is a layer these rules do not know");
          return One(SeqInfo::Exact());
        }
      },
      spec);
}

}  // namespace rnnserve::engine::plan
