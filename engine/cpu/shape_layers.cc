#include "engine/cpu/shape_layers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/plan/layer_plans.h"
#include "engine/plan/masks.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::cpu {
namespace {

using plan::FlattenShape;
using plan::MergeShape;
using plan::RepeatVectorShape;
using plan::ReshapeLayerShape;
using plan::Strides;

void DropMask(Value* out) {
  out->lengths.clear();
  out->step_mask.clear();
}

}  // namespace

void MergeMasks(const std::vector<const Value*>& in, Value* out) {
  std::vector<plan::MaskRef> masks;
  for (const Value* v : in) masks.push_back({&v->lengths, &v->step_mask});
  plan::MergeMasks(masks, &out->lengths, &out->step_mask);
}

absl::Status RunFlatten(const std::string& name, const Value& in, Value* out) {
  auto shape = FlattenShape(name, in.tensor.shape());
  if (!shape.ok()) return shape.status();
  out->tensor = in.tensor;
  out->tensor.Reshape(*shape);
  DropMask(out);
  return absl::OkStatus();
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
