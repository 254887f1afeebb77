#include "engine/cpu/shape_layers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::engine::cpu {
namespace {

void DropMask(Value* out) {
  out->lengths.clear();
  out->step_mask.clear();
}

}  // namespace

void MergeMasks(const std::vector<const Value*>& in, Value* out) {
  DropMask(out);
  for (const Value* v : in) {
    if (v->lengths.empty()) continue;
    if (out->lengths.empty()) {
      out->lengths = v->lengths;
    } else {
      for (size_t b = 0; b < out->lengths.size(); ++b) {
        out->lengths[b] = std::min(out->lengths[b], v->lengths[b]);
      }
    }
  }
  // Interior step masks, ANDed and cut at the merged lengths.
  const Value* first_steps = nullptr;
  for (const Value* v : in) {
    if (!v->step_mask.empty()) first_steps = v;
  }
  if (first_steps == nullptr) return;
  const int64_t B = out->lengths.size();
  const int64_t T = static_cast<int64_t>(first_steps->step_mask.size()) / std::max<int64_t>(B, 1);
  std::vector<uint8_t> valid(B * T, 0);  // [B, T]
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < out->lengths[b]; ++t) {
      uint8_t ok = 1;
      for (const Value* v : in) {
        if (!v->step_mask.empty()) ok &= v->step_mask[b * T + t];
      }
      valid[b * T + t] = ok;
    }
  }
  SetMaskFromSteps(valid, B, T, out);
}

absl::StatusOr<Shape> FlattenShape(const std::string& name, const Shape& x) {
  if (x.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': input ", ShapeString(x), " has no batch axis"));
  }
  return Shape{x[0], x[0] == 0 ? 0 : NumElements(x) / x[0]};
}

absl::Status RunFlatten(const std::string& name, const Value& in, Value* out) {
  auto shape = FlattenShape(name, in.tensor.shape());
  if (!shape.ok()) return shape.status();
  out->tensor = in.tensor;
  out->tensor.Reshape(*shape);
  DropMask(out);
  return absl::OkStatus();
}

absl::StatusOr<Shape> ReshapeLayerShape(const ReshapeSpec& spec, const std::string& name,
                                        const Shape& x) {
  if (x.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input has no batch axis"));
  }
  const int64_t count = NumElements(x);
  const int64_t per_item = x[0] == 0 ? 0 : count / x[0];
  Shape shape = {x[0]};
  int64_t known = 1;
  int free_axis = -1;
  for (size_t i = 0; i < spec.target.size(); ++i) {
    const int64_t d = spec.target[i];
    if (d == -1 && free_axis < 0) {
      free_axis = static_cast<int>(i) + 1;
    } else if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': target shape ",
                                                     absl::StrJoin(spec.target, ","),
                                                     " may hold one -1 and no other negative"));
    } else {
      known *= d;
    }
    shape.push_back(d);
  }
  if (free_axis >= 0 && known > 0 && per_item % known == 0) shape[free_axis] = per_item / known;
  if (NumElements(shape) != count) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': cannot reshape ",
                                                   ShapeString(x), " to [B,",
                                                   absl::StrJoin(spec.target, ","), "]"));
  }
  return shape;
}

absl::Status RunReshape(const ReshapeSpec& spec, const std::string& name, const Value& in,
                        Value* out) {
  auto shape = ReshapeLayerShape(spec, name, in.tensor.shape());
  if (!shape.ok()) return shape.status();
  out->tensor = in.tensor;
  out->tensor.Reshape(*shape);
  DropMask(out);
  return absl::OkStatus();
}

absl::StatusOr<Shape> RepeatVectorShape(const RepeatVectorSpec& spec, const std::string& name,
                                        DType dtype, const Shape& x) {
  if (dtype != DType::kFloat32 || x.size() != 2 || spec.n <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", ShapeString(x),
                                                   " expected FP32 [B,C] and n ", spec.n,
                                                   " positive"));
  }
  return Shape{x[0], spec.n, x[1]};
}

absl::Status RunRepeatVector(const RepeatVectorSpec& spec, const std::string& name, const Value& in,
                             Value* out) {
  const Tensor& x = in.tensor;
  auto shape = RepeatVectorShape(spec, name, x.dtype(), x.shape());
  if (!shape.ok()) return shape.status();
  const int64_t B = x.dim(0), C = x.dim(1);
  out->tensor = Tensor::Float(*shape);
  for (int64_t b = 0; b < B; ++b) {
    for (int i = 0; i < spec.n; ++i) {
      std::copy_n(x.f32() + b * C, C, out->tensor.f32() + (b * spec.n + i) * C);
    }
  }
  DropMask(out);
  return absl::OkStatus();
}

absl::StatusOr<Shape> MergeShape(const MergeSpec& spec, const std::string& name,
                                 const std::vector<Shape>& shapes,
                                 const std::vector<DType>& dtypes) {
  if (shapes.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': a merge needs at least 2 inputs, got ", shapes.size()));
  }
  const int rank = static_cast<int>(shapes[0].size());
  for (size_t k = 0; k < shapes.size(); ++k) {
    if (dtypes[k] != DType::kFloat32 || static_cast<int>(shapes[k].size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", name, "': input ", ShapeString(shapes[k]), " expected FP32 of rank ", rank));
    }
  }
  if (spec.kind == MergeSpec::Kind::kConcatenate) {
    const int axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", name, "': axis ", spec.axis, " outside rank ", rank));
    }
    Shape shape = shapes[0];
    shape[axis] = 0;
    for (const Shape& v : shapes) {
      for (int i = 0; i < rank; ++i) {
        if (i != axis && v[i] != shapes[0][i]) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer '", name, "': cannot concatenate ", ShapeString(v), " with ",
                           ShapeString(shapes[0]), " on axis ", spec.axis));
        }
      }
      shape[axis] += v[axis];
    }
    return shape;
  }
  if (spec.kind == MergeSpec::Kind::kSubtract && shapes.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': Subtract takes exactly 2 inputs, got ", shapes.size()));
  }
  // Element-wise, with NumPy broadcasting over axes of size 1.
  Shape shape(rank, 1);
  for (const Shape& v : shapes) {
    for (int i = 0; i < rank; ++i) {
      const int64_t d = v[i];
      if (d == shape[i] || d == 1) continue;
      if (shape[i] != 1) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input shapes ",
                                                       ShapeString(shapes[0]), " and ",
                                                       ShapeString(v), " do not broadcast"));
      }
      shape[i] = d;
    }
  }
  return shape;
}

absl::Status RunMerge(const MergeSpec& spec, const std::string& name,
                      const std::vector<const Value*>& in, Value* out) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Value* v : in) {
    shapes.push_back(v->tensor.shape());
    dtypes.push_back(v->tensor.dtype());
  }
  auto merged = MergeShape(spec, name, shapes, dtypes);
  if (!merged.ok()) return merged.status();
  const Shape& shape = *merged;
  const int rank = static_cast<int>(shape.size());
  if (spec.kind == MergeSpec::Kind::kConcatenate) {
    const int axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
    // [outer, sum(n_i * inner)]: each input contributes a contiguous block per outer index.
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= shape[i];
    for (int i = axis + 1; i < rank; ++i) inner *= shape[i];
    Tensor y = Tensor::Float(shape);
    const int64_t row = shape[axis] * inner;
    int64_t offset = 0;
    for (const Value* v : in) {
      const int64_t block = v->tensor.dim(axis) * inner;
      for (int64_t o = 0; o < outer; ++o) {
        std::copy_n(v->tensor.f32() + o * block, block, y.f32() + o * row + offset);
      }
      offset += block;
    }
    out->tensor = std::move(y);
    MergeMasks(in, out);
    return absl::OkStatus();
  }
  Tensor y = Tensor::Float(shape);
  const int64_t n = y.num_elements();
  // Strides of each input in output coordinates (0 on broadcast axes).
  std::vector<std::vector<int64_t>> strides;
  for (const Value* v : in) {
    std::vector<int64_t> s(rank, 0);
    int64_t step = 1;
    for (int i = rank - 1; i >= 0; --i) {
      s[i] = v->tensor.dim(i) == 1 ? 0 : step;
      step *= v->tensor.dim(i);
    }
    strides.push_back(std::move(s));
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < n; ++e) {
    float acc = 0.0f;
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t off = 0;
      for (int i = 0; i < rank; ++i) off += idx[i] * strides[k][i];
      const float v = in[k]->tensor.f32()[off];
      if (k == 0) {
        acc = v;
        continue;
      }
      switch (spec.kind) {
        case MergeSpec::Kind::kAdd:
        case MergeSpec::Kind::kAverage:
          acc += v;
          break;
        case MergeSpec::Kind::kSubtract:
          acc -= v;
          break;
        case MergeSpec::Kind::kMultiply:
          acc *= v;
          break;
        case MergeSpec::Kind::kMaximum:
          acc = std::max(acc, v);
          break;
        case MergeSpec::Kind::kMinimum:
          acc = std::min(acc, v);
          break;
        case MergeSpec::Kind::kConcatenate:
          break;
      }
    }
    if (spec.kind == MergeSpec::Kind::kAverage) acc /= static_cast<float>(in.size());
    y.f32()[e] = acc;
    for (int i = rank - 1; i >= 0; --i) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  out->tensor = std::move(y);
  MergeMasks(in, out);
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cpu
