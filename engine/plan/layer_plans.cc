// Shape plans and checks of the Keras layers (layer_plans.h).

#include "engine/plan/layer_plans.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/plan/tensor_op_plans.h"

namespace rnnserve::engine::plan {
namespace {

absl::Status CheckOptional(const std::string& name, const char* what, size_t got, size_t want) {
  if (got == 0 || got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("layer '", name, "': ", what, " has ", got, " values, expected ", want));
}

}  // namespace

absl::StatusOr<Shape> FlattenShape(const std::string& name, const Shape& x) {
  if (x.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': input ", ShapeString(x), " has no batch axis"));
  }
  return Shape{x[0], x[0] == 0 ? 0 : NumElements(x) / x[0]};
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

absl::StatusOr<Shape> RepeatVectorShape(const RepeatVectorSpec& spec, const std::string& name,
                                        DType dtype, const Shape& x) {
  if (dtype != DType::kFloat32 || x.size() != 2 || spec.n <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", ShapeString(x),
                                                   " expected FP32 [B,C] and n ", spec.n,
                                                   " positive"));
  }
  return Shape{x[0], spec.n, x[1]};
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

Window PlanWindow(int64_t t, int64_t span, int64_t stride, bool same, bool causal) {
  Window w;
  if (causal) {
    w.pad_left = span - 1;
    w.out_len = (t + w.pad_left - span) / stride + 1;
  } else if (same) {
    w.out_len = (t + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((w.out_len - 1) * stride + span - t, 0);
    w.pad_left = total / 2;
  } else {
    w.out_len = t >= span ? (t - span) / stride + 1 : 0;
  }
  return w;
}

absl::Status CheckSequence(const std::string& name, const Tensor& x, int64_t channels) {
  return CheckSequence(name, x.dtype(), x.shape(), channels);
}

absl::Status CheckSequence(const std::string& name, DType dtype, const Shape& x, int64_t channels) {
  if (dtype != DType::kFloat32 || x.size() != 3 || (channels > 0 && x[2] != channels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': input ", DTypeName(dtype), " ", ShapeString(x),
                     " expected FP32 [B,T,", channels > 0 ? std::to_string(channels) : "C", "]"));
  }
  return absl::OkStatus();
}

Window Conv1DWindow(const Conv1DSpec& spec, int64_t t) {
  return PlanWindow(t, int64_t{spec.kernel_size - 1} * spec.dilation + 1, spec.stride,
                    spec.padding == Conv1DSpec::Padding::kSame,
                    spec.padding == Conv1DSpec::Padding::kCausal);
}

absl::Status ValidateConv1D(const Conv1DSpec& spec, const std::string& name) {
  if (spec.in_channels <= 0 || spec.out_channels <= 0 || spec.kernel_size <= 0 ||
      spec.stride <= 0 || spec.dilation <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': channels ", spec.in_channels, "->", spec.out_channels,
                     ", kernel size ", spec.kernel_size, ", stride ", spec.stride, " and dilation ",
                     spec.dilation, " must all be positive"));
  }
  const size_t want = size_t(spec.kernel_size) * spec.in_channels * spec.out_channels;
  if (spec.kernel.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': kernel has ",
                                                   spec.kernel.size(), " values, expected ", want,
                                                   " ([k, Cin, Cout])"));
  }
  if (!spec.bias.empty() && spec.bias.size() != size_t(spec.out_channels)) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': bias has ",
                                                   spec.bias.size(), " values, expected ",
                                                   spec.out_channels));
  }
  return absl::OkStatus();
}

absl::Status ValidatePool1D(const Pool1DSpec& spec, const std::string& name) {
  if (spec.pool_size <= 0 || spec.stride <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': pool size ", spec.pool_size,
                                                   " and stride ", spec.stride,
                                                   " must be positive"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchNorm(const BatchNormSpec& spec, const std::string& name) {
  const size_t c = spec.mean.size();
  if (c == 0 || spec.variance.size() != c) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': moving mean has ", c, " values and moving variance ",
                     spec.variance.size(), "; expected the same positive count"));
  }
  if (auto s = CheckOptional(name, "gamma", spec.gamma.size(), c); !s.ok()) return s;
  return CheckOptional(name, "beta", spec.beta.size(), c);
}

absl::Status ValidateLayerNorm(const LayerNormSpec& spec, const std::string& name) {
  if (!spec.gamma.empty() && !spec.beta.empty() && spec.gamma.size() != spec.beta.size()) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': gamma has ",
                                                   spec.gamma.size(), " values, beta ",
                                                   spec.beta.size(), "; expected equal counts"));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchNormInput(const BatchNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x) {
  const size_t c = spec.mean.size();
  if (dtype != DType::kFloat32 || x.empty() || static_cast<size_t>(x.back()) != c) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", DTypeName(dtype),
                                                   " ", ShapeString(x),
                                                   " expected FP32 with last axis ", c));
  }
  return absl::OkStatus();
}

absl::Status CheckLayerNormInput(const LayerNormSpec& spec, const std::string& name, DType dtype,
                                 const Shape& x) {
  const size_t params = std::max(spec.gamma.size(), spec.beta.size());
  if (dtype != DType::kFloat32 || x.empty() ||
      (params > 0 && static_cast<size_t>(x.back()) != params)) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': input ", ShapeString(x),
                                                   " expected FP32 with last axis ", params));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SoftmaxAxis(const SoftmaxSpec& spec, const std::string& name, DType dtype,
                                const Shape& x) {
  const int rank = static_cast<int>(x.size());
  const int axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
  if (dtype != DType::kFloat32 || axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("layer '", name, "': softmax axis ", spec.axis,
                                                   " does not fit FP32 input ", ShapeString(x)));
  }
  return axis;
}

void FoldBatchNorm(const BatchNormSpec& spec, std::vector<float>* scale,
                   std::vector<float>* shift) {
  const size_t c = spec.mean.size();
  scale->resize(c);
  shift->resize(c);
  for (size_t j = 0; j < c; ++j) {
    const float inv = 1.0f / std::sqrt(spec.variance[j] + spec.epsilon);
    (*scale)[j] = (spec.gamma.empty() ? 1.0f : spec.gamma[j]) * inv;
    (*shift)[j] = (spec.beta.empty() ? 0.0f : spec.beta[j]) - spec.mean[j] * (*scale)[j];
  }
}

}  // namespace rnnserve::engine::plan
