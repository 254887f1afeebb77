#include "server/tensor_codec.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rnnserve::server {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 28;

template <typename T>
std::vector<T> FromRaw(const std::string& raw, int64_t n) {
  std::vector<T> v(n);
  std::memcpy(v.data(), raw.data(), n * sizeof(T));
  return v;
}

// The element count of `shape`, checked: no negative axis, at most kMaxElements.
absl::StatusOr<int64_t> CountElements(const engine::Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension in shape ", engine::ShapeString(shape)));
    }
    // Checked before multiplying: a product past int64 would be undefined, not just large.
    if (d != 0 && n > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", engine::ShapeString(shape),
                                                     " exceeds ", kMaxElements, " elements"));
    }
    n *= d;
  }
  return n;
}

absl::Status CountError(const std::string& what, const engine::Shape& shape, int64_t n,
                        int64_t got) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", engine::ShapeString(shape),
                                                 " needs ", n, " values, got ", got));
}

// Float values (float_val, double_val or raw_content) as whole-number ids.
template <typename T>
absl::StatusOr<engine::Tensor> WholeNumbers(const v1::Tensor& proto,
                                            const google::protobuf::RepeatedField<T>& typed,
                                            const std::string& what) {
  engine::Shape shape(proto.shape().begin(), proto.shape().end());
  auto n = CountElements(shape, what);
  if (!n.ok()) return n.status();
  const bool raw = !proto.raw_content().empty();
  const int64_t got = raw ? static_cast<int64_t>(proto.raw_content().size() / sizeof(T))
                          : static_cast<int64_t>(typed.size());
  if (got != *n || (raw && proto.raw_content().size() % sizeof(T) != 0)) {
    return CountError(what, shape, *n, got);
  }
  const std::vector<T> values =
      raw ? FromRaw<T>(proto.raw_content(), *n) : std::vector<T>(typed.begin(), typed.end());
  constexpr double kExact = 9007199254740992.0;  // 2^53: every integer below is exact
  std::vector<int64_t> ids(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) > kExact) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": value ", i, " is ", v, "; token ids sent as ",
                       v1::DataType_Name(proto.dtype()), " must be whole numbers"));
    }
    ids[i] = static_cast<int64_t>(v);
  }
  return engine::Tensor::Int64(shape, std::move(ids));
}

}  // namespace

absl::StatusOr<engine::Tensor> DecodeTokenIds(const v1::Tensor& proto, const std::string& what) {
  if (proto.dtype() == v1::TYPE_FP32) return WholeNumbers<float>(proto, proto.float_val(), what);
  if (proto.dtype() == v1::TYPE_FP64) return WholeNumbers<double>(proto, proto.double_val(), what);
  return DecodeTensor(proto, what);
}

v1::DataType WireType(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? v1::TYPE_INT64 : v1::TYPE_FP32;
}

absl::StatusOr<engine::Tensor> DecodeTensor(const v1::Tensor& proto, const std::string& what) {
  engine::Shape shape(proto.shape().begin(), proto.shape().end());
  auto count = CountElements(shape, what);
  if (!count.ok()) return count.status();
  const int64_t n = *count;
  const bool raw = !proto.raw_content().empty();
  auto count_error = [&](int64_t got) { return CountError(what, shape, n, got); };
  switch (proto.dtype()) {
    case v1::TYPE_FP32: {
      if (raw) {
        if (static_cast<int64_t>(proto.raw_content().size()) != n * 4) {
          return count_error(static_cast<int64_t>(proto.raw_content().size()) / 4);
        }
        return engine::Tensor::Float(shape, FromRaw<float>(proto.raw_content(), n));
      }
      if (proto.float_val_size() != n) return count_error(proto.float_val_size());
      return engine::Tensor::Float(shape, {proto.float_val().begin(), proto.float_val().end()});
    }
    case v1::TYPE_INT32: {
      std::vector<int64_t> v;
      if (raw) {
        if (static_cast<int64_t>(proto.raw_content().size()) != n * 4) {
          return count_error(static_cast<int64_t>(proto.raw_content().size()) / 4);
        }
        for (int32_t x : FromRaw<int32_t>(proto.raw_content(), n)) v.push_back(x);
      } else {
        if (proto.int_val_size() != n) return count_error(proto.int_val_size());
        v.assign(proto.int_val().begin(), proto.int_val().end());
      }
      return engine::Tensor::Int64(shape, std::move(v));
    }
    case v1::TYPE_INT64: {
      if (raw) {
        if (static_cast<int64_t>(proto.raw_content().size()) != n * 8) {
          return count_error(static_cast<int64_t>(proto.raw_content().size()) / 8);
        }
        return engine::Tensor::Int64(shape, FromRaw<int64_t>(proto.raw_content(), n));
      }
      if (proto.int64_val_size() != n) return count_error(proto.int64_val_size());
      return engine::Tensor::Int64(shape, {proto.int64_val().begin(), proto.int64_val().end()});
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ",
                                                     v1::DataType_Name(proto.dtype()),
                                                     " is not accepted (TYPE_FP32, TYPE_INT32 "
                                                     "or TYPE_INT64)"));
  }
}

void EncodeTensor(const engine::Tensor& tensor, v1::Tensor* proto) {
  proto->Clear();
  proto->set_dtype(WireType(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto->add_shape(d);
  if (tensor.dtype() == engine::DType::kInt64) {
    proto->mutable_int64_val()->Add(tensor.i64(), tensor.i64() + tensor.num_elements());
  } else {
    proto->mutable_float_val()->Add(tensor.f32(), tensor.f32() + tensor.num_elements());
  }
}

}  // namespace rnnserve::server
