#include "models/onnx/onnx_tensor.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"

namespace rnnserve::models::onnx {
namespace {

using engine::Shape;
using engine::Tensor;

// FLOAT16 / BFLOAT16 bit patterns widened to float32 (exact: every value of both formats is a
// float32, subnormals, infinities and NaN included).
float HalfToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}
float Bfloat16ToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

// Reads element i of little-endian raw data of `width` bytes as T.
template <typename T>
T Raw(const std::string& raw, int64_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
  return v;
}

absl::Status SizeMismatch(const std::string& what, int64_t want, int64_t got, const char* field) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " declares ", want, " elements but its ", field, " holds ", got));
}

// Bytes per element of an ONNX data type in raw_data; 0 for the types rnnserve does not read.
int ElementWidth(int type) {
  using TP = TensorProto;
  switch (type) {
    case TP::FLOAT:
    case TP::INT32:
    case TP::UINT32:
      return 4;
    case TP::DOUBLE:
    case TP::INT64:
    case TP::UINT64:
      return 8;
    case TP::FLOAT16:
    case TP::BFLOAT16:
    case TP::INT16:
    case TP::UINT16:
      return 2;
    case TP::INT8:
    case TP::UINT8:
    case TP::BOOL:
      return 1;
    default:
      return 0;
  }
}

// The n values of a FLOAT, DOUBLE, FLOAT16 or BFLOAT16 tensor (sizes checked by the caller for
// raw_data), widened or narrowed to float32.
absl::StatusOr<std::vector<float>> FloatValues(const TensorProto& p, const std::string& what,
                                               int64_t n) {
  const std::string& raw = p.raw_data();
  const bool has_raw = p.has_raw_data();
  const int type = p.data_type();
  using TP = TensorProto;
  std::vector<float> v(n);
  if (type == TP::FLOAT) {
    if (has_raw) {
      std::memcpy(v.data(), raw.data(), n * sizeof(float));
    } else if (p.float_data_size() == n) {
      std::copy(p.float_data().begin(), p.float_data().end(), v.begin());
    } else {
      return SizeMismatch(what, n, p.float_data_size(), "float_data");
    }
  } else if (type == TP::DOUBLE) {
    if (!has_raw && p.double_data_size() != n) {
      return SizeMismatch(what, n, p.double_data_size(), "double_data");
    }
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<float>(has_raw ? Raw<double>(raw, i) : p.double_data(i));
    }
  } else {
    if (!has_raw && p.int32_data_size() != n) {
      return SizeMismatch(what, n, p.int32_data_size(), "int32_data");
    }
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t bits =
          has_raw ? Raw<uint16_t>(raw, i) : static_cast<uint16_t>(p.int32_data(i));
      v[i] = type == TP::FLOAT16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
    }
  }
  return v;
}

// The n values of an integer or BOOL tensor as int64.
absl::StatusOr<std::vector<int64_t>> IntValues(const TensorProto& p, const std::string& what,
                                               int64_t n) {
  const std::string& raw = p.raw_data();
  const bool has_raw = p.has_raw_data();
  const int type = p.data_type();
  using TP = TensorProto;
  std::vector<int64_t> v(n);
  if (type == TP::INT64) {
    if (has_raw) {
      std::memcpy(v.data(), raw.data(), n * sizeof(int64_t));
    } else if (p.int64_data_size() == n) {
      std::copy(p.int64_data().begin(), p.int64_data().end(), v.begin());
    } else {
      return SizeMismatch(what, n, p.int64_data_size(), "int64_data");
    }
  } else if (type == TP::UINT64) {
    if (!has_raw && p.uint64_data_size() != n) {
      return SizeMismatch(what, n, p.uint64_data_size(), "uint64_data");
    }
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<int64_t>(has_raw ? Raw<uint64_t>(raw, i) : p.uint64_data(i));
    }
  } else {
    if (!has_raw && p.int32_data_size() != n) {
      return SizeMismatch(what, n, p.int32_data_size(), "int32_data");
    }
    for (int64_t i = 0; i < n; ++i) {
      if (!has_raw) {
        v[i] = p.int32_data(i);
        continue;
      }
      switch (type) {
        case TP::INT32:
          v[i] = Raw<int32_t>(raw, i);
          break;
        case TP::UINT32:
          v[i] = Raw<uint32_t>(raw, i);
          break;
        case TP::INT16:
          v[i] = Raw<int16_t>(raw, i);
          break;
        case TP::UINT16:
          v[i] = Raw<uint16_t>(raw, i);
          break;
        case TP::INT8:
          v[i] = Raw<int8_t>(raw, i);
          break;
        default:
          v[i] = Raw<uint8_t>(raw, i);
          break;  // UINT8, BOOL
      }
    }
  }
  return v;
}

}  // namespace

std::string OnnxTypeName(int data_type) {
  static const char* const kNames[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                       "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                       "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                       "COMPLEX128", "BFLOAT16"};
  if (data_type >= 0 && data_type < static_cast<int>(std::size(kNames))) return kNames[data_type];
  return absl::StrCat("type ", data_type);
}

bool AllFinite(const Tensor& t) {
  if (t.dtype() != engine::DType::kFloat32) return true;
  for (float v : t.floats()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

absl::StatusOr<Tensor> TensorFromProto(const TensorProto& p, const std::string& what) {
  if (p.data_location() == TensorProto::EXTERNAL || p.external_data_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        " keeps its data in an external file; rnnserve reads self-contained .onnx files "
        "(re-export without external data)"));
  }
  Shape shape;
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has negative dimension ", d));
    }
    if (d != 0 && n > kMaxOnnxTensorElements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " declares more than ", kMaxOnnxTensorElements, " elements"));
    }
    n *= d;
    shape.push_back(d);
  }
  const std::string& raw = p.raw_data();
  const bool has_raw = p.has_raw_data();
  const int type = p.data_type();
  using TP = TensorProto;
  const int width = ElementWidth(type);
  if (width == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has element type ", OnnxTypeName(type),
                                                   "; rnnserve reads numeric tensors only"));
  }
  if (has_raw && static_cast<int64_t>(raw.size()) != n * width) {
    return absl::InvalidArgumentError(absl::StrCat(what, " declares ", n, " elements of ", width,
                                                   " bytes but raw_data holds ", raw.size(),
                                                   " bytes"));
  }
  const bool is_float =
      type == TP::FLOAT || type == TP::DOUBLE || type == TP::FLOAT16 || type == TP::BFLOAT16;
  if (is_float) {
    auto v = FloatValues(p, what, n);
    if (!v.ok()) return v.status();
    return Tensor::Float(shape, std::move(*v));
  }
  auto v = IntValues(p, what, n);
  if (!v.ok()) return v.status();
  return Tensor::Int64(shape, std::move(*v));
}

}  // namespace rnnserve::models::onnx
