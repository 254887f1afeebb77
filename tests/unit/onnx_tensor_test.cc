// FLOAT16 and BFLOAT16 initializers widen to float32 exactly. Expected values are the IEEE 754
// binary16 definitions and bfloat16's (the top half of a binary32), written as powers of two,
// both in raw_data (little-endian) and in int32_data, the two places ONNX allows.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/onnx/onnx_tensor.h"

namespace rnnserve::models::onnx {
namespace {

struct Case {
  uint16_t bits;
  float value;
};

TensorProto Proto(int type, const std::vector<Case>& cases, bool raw) {
  TensorProto p;
  p.set_data_type(type);
  p.add_dims(static_cast<int64_t>(cases.size()));
  std::string bytes;
  for (const Case& c : cases) {
    if (raw) {
      bytes.push_back(static_cast<char>(c.bits & 0xff));
      bytes.push_back(static_cast<char>(c.bits >> 8));
    } else {
      p.add_int32_data(c.bits);
    }
  }
  if (raw) p.set_raw_data(bytes);
  return p;
}

void ExpectWidened(int type, const std::vector<Case>& cases) {
  for (bool raw : {true, false}) {
    SCOPED_TRACE(raw ? "raw_data" : "int32_data");
    absl::StatusOr<engine::Tensor> t = TensorFromProto(Proto(type, cases, raw), "initializer");
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ(t->floats().size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const float got = t->floats()[i];
      SCOPED_TRACE(testing::Message() << "bits 0x" << std::hex << cases[i].bits);
      if (std::isnan(cases[i].value)) {
        EXPECT_TRUE(std::isnan(got));
      } else {
        EXPECT_EQ(got, cases[i].value);  // exact, sign of zero included
        EXPECT_EQ(std::signbit(got), std::signbit(cases[i].value));
      }
    }
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

TEST(OnnxTensor, Float16WidensExactlyIncludingSubnormalsAndSpecials) {
  ExpectWidened(TensorProto::FLOAT16, {{0x3C00, 1.0f},
                                       {0xC000, -2.0f},
                                       {0x7BFF, 65504.0f},                  // largest finite
                                       {0x0400, std::ldexp(1.0f, -14)},     // smallest normal
                                       {0x0001, std::ldexp(1.0f, -24)},     // smallest subnormal
                                       {0x03FF, std::ldexp(1023.0f, -24)},  // largest subnormal
                                       {0x8001, -std::ldexp(1.0f, -24)},    // negative subnormal
                                       {0x3555, std::ldexp(1365.0f, -12)},  // 0.333251953125
                                       {0x0000, 0.0f},
                                       {0x8000, -0.0f},
                                       {0x7C00, kInf},
                                       {0xFC00, -kInf},
                                       {0x7E00, kNan}});
}

TEST(OnnxTensor, Bfloat16WidensExactlyIncludingSubnormalsAndSpecials) {
  ExpectWidened(TensorProto::BFLOAT16,
                {{0x3F80, 1.0f},
                 {0xC040, -3.0f},
                 {0x7F7F, std::ldexp(255.0f, 120)},  // largest finite, (2 - 2^-7) * 2^127
                 {0x0080, std::ldexp(1.0f, -126)},   // smallest normal
                 {0x0001, std::ldexp(1.0f, -133)},   // smallest subnormal
                 {0x3EAB, std::ldexp(171.0f, -9)},   // 0.333984375
                 {0x8000, -0.0f},
                 {0x7F80, kInf},
                 {0xFF80, -kInf},
                 {0x7FC0, kNan}});
}

}  // namespace
}  // namespace rnnserve::models::onnx
