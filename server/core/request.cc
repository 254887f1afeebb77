#include "server/core/request.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rnnserve::server::core {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 28;

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

// A tensor over the view's bytes (FP32 or INT64) when they are aligned for it; else a copy.
engine::Tensor ViewOrCopy(const InputView& v, engine::DType dtype) {
  const bool f32 = dtype == engine::DType::kFloat32;
  if (reinterpret_cast<uintptr_t>(v.bytes.data()) % (f32 ? alignof(float) : alignof(int64_t)) ==
      0) {
    return engine::Tensor::Wrap(dtype, v.shape, const_cast<char*>(v.bytes.data()), nullptr);
  }
  engine::Tensor t = f32 ? engine::Tensor::Float(v.shape) : engine::Tensor::Int64(v.shape);
  std::memcpy(f32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i64()), v.bytes.data(),
              v.bytes.size());
  return t;
}

// Float values as whole-number ids.
template <typename T>
absl::StatusOr<engine::Tensor> WholeNumbers(const InputView& v, int64_t n,
                                            const std::string& what) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: every integer below is exact
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, v.bytes.data() + i * sizeof(T), sizeof(T));
    const double d = x;
    if (!std::isfinite(d) || d != std::trunc(d) || std::fabs(d) > kExact) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": value ", i, " is ", d, "; token ids sent as ",
                       ElementTypeName(v.type), " must be whole numbers"));
    }
    ids[i] = static_cast<int64_t>(d);
  }
  return engine::Tensor::Int64(v.shape, std::move(ids));
}

}  // namespace

// Indexed by ElementType.
constexpr const char* kNames[] = {"TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_INT32",
                                  "TYPE_INT64",   "TYPE_FP16", "TYPE_FP32",  "TYPE_FP64"};
constexpr int64_t kBytes[] = {1, 1, 1, 4, 8, 2, 4, 8};

std::string ElementTypeName(ElementType type) { return kNames[static_cast<int>(type)]; }

int64_t ElementBytes(ElementType type) { return kBytes[static_cast<int>(type)]; }

bool Feeds(ElementType given, engine::DType want) {
  if (want == engine::DType::kInt64) {
    return given == ElementType::kInt32 || given == ElementType::kInt64 ||
           given == ElementType::kFp32 || given == ElementType::kFp64;
  }
  return given == ElementType::kFp32;
}

absl::StatusOr<engine::Tensor> ToEngineTensor(const InputView& v, bool token_ids,
                                              const std::string& what) {
  auto count = CountElements(v.shape, what);
  if (!count.ok()) return count.status();
  const int64_t n = *count;
  const bool accepted = v.type == ElementType::kFp32 || v.type == ElementType::kInt32 ||
                        v.type == ElementType::kInt64 ||
                        (token_ids && v.type == ElementType::kFp64);
  if (!accepted) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ", ElementTypeName(v.type),
                                                   " is not accepted (TYPE_FP32, TYPE_INT32 "
                                                   "or TYPE_INT64)"));
  }
  const int64_t size = ElementBytes(v.type);
  if (static_cast<int64_t>(v.bytes.size()) != n * size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", engine::ShapeString(v.shape),
                                                   " needs ", n, " values, got ",
                                                   static_cast<int64_t>(v.bytes.size()) / size));
  }
  switch (v.type) {
    case ElementType::kFp32:
      if (token_ids) return WholeNumbers<float>(v, n, what);
      return ViewOrCopy(v, engine::DType::kFloat32);
    case ElementType::kFp64:
      return WholeNumbers<double>(v, n, what);
    case ElementType::kInt64:
      return ViewOrCopy(v, engine::DType::kInt64);
    default: {  // INT32: the engine holds integers as int64
      std::vector<int64_t> values(n);
      for (int64_t i = 0; i < n; ++i) {
        int32_t x;
        std::memcpy(&x, v.bytes.data() + i * 4, 4);
        values[i] = x;
      }
      return engine::Tensor::Int64(v.shape, std::move(values));
    }
  }
}

}  // namespace rnnserve::server::core
