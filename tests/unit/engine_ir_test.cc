#include "engine/ir.h"

#include "engine/engine.h"
#include "engine/no_cuda_reason.h"
#include "engine/ops/activation.h"
#include "gtest/gtest.h"

namespace rnnserve::engine {
namespace {

RecurrentSpec SmallLstm(int I, int H) {
  RecurrentSpec spec;
  spec.cell = CellType::kLstm;
  spec.input_size = I;
  spec.hidden_size = H;
  RecurrentDirection d;
  d.W.assign(4 * H * I, 0.1f);
  d.R.assign(4 * H * H, 0.1f);
  d.bW.assign(4 * H, 0.0f);
  d.bR.assign(4 * H, 0.0f);
  spec.directions.push_back(d);
  return spec;
}

TEST(RecurrentSpec, ValidateAcceptsCanonicalSizes) {
  EXPECT_TRUE(SmallLstm(3, 5).Validate("lstm").ok());
}

TEST(RecurrentSpec, ValidateNamesLayerAndTensorOnWrongSize) {
  RecurrentSpec spec = SmallLstm(3, 5);
  spec.directions[0].R.pop_back();
  const absl::Status s = spec.Validate("my_lstm");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("my_lstm"), std::string::npos);
  EXPECT_NE(s.message().find("R has 99 values, expected 100"), std::string::npos) << s;
}

TEST(Model, ValidateRejectsReadBeforeDefinition) {
  Model m;
  m.inputs.push_back({"x", DType::kFloat32, {-1, -1, 3}});
  Layer l;
  l.name = "lstm";
  l.spec = SmallLstm(3, 5);
  l.inputs = {1};
  l.outputs = {2};
  m.layers.push_back(l);
  m.num_values = 3;
  m.outputs.push_back({"lstm", DType::kFloat32, {}});
  m.output_values = {2};
  const absl::Status s = m.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("before it is defined"), std::string::npos) << s;
}

TEST(Activation, HardSigmoidFormsDiffer) {
  // Keras 2: clip(0.2x + 0.5); Keras 3: clip(x/6 + 0.5).
  EXPECT_FLOAT_EQ(Activate(Activation::HardSigmoidKeras2(), 1.0f), 0.7f);
  EXPECT_FLOAT_EQ(Activate(Activation::HardSigmoidKeras3(), 1.0f), 0.5f + 1.0f / 6.0f);
  EXPECT_FLOAT_EQ(Activate(Activation::HardSigmoidKeras2(), 3.0f), 1.0f);
  EXPECT_FLOAT_EQ(Activate(Activation::HardSigmoidKeras3(), -4.0f), 0.0f);
}

TEST(CpuEngine, CompileRejectsUnsupportedLayerByNameAndClass) {
  Model m;
  m.inputs.push_back({"x", DType::kFloat32, {-1, -1, 3}});
  Layer l;
  l.name = "attention_1";
  l.source_class = "Attention";
  l.spec = UnsupportedSpec{"no converter"};
  l.inputs = {0};
  l.outputs = {1};
  m.layers.push_back(l);
  m.num_values = 2;
  m.outputs.push_back({"attention_1", DType::kFloat32, {}});
  m.output_values = {1};
  auto engine = Engine::Create({});
  ASSERT_TRUE(engine.ok());
  auto compiled = (*engine)->Compile(m, {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("attention_1"), std::string::npos);
  EXPECT_NE(compiled.status().message().find("Attention"), std::string::npos);
}

// What a CPU host's user reads for why no GPU runs their model: plain words, then CUDA's.
TEST(NoCudaDeviceReasonTest, SaysPlainlyThatThereIsNoDriverThenWhatCudaSaid) {
  EXPECT_EQ(
      NoCudaDeviceReason("CUDA driver version is insufficient for CUDA runtime version", 0, 13000),
      "no CUDA device: no NVIDIA driver found (CUDA runtime: CUDA driver version is "
      "insufficient for CUDA runtime version)");
  EXPECT_EQ(NoCudaDeviceReason("CUDA driver version is insufficient for CUDA runtime version",
                               12020, 13000),
            "no CUDA device: the NVIDIA driver supports CUDA 12.2; this build needs 13.0 (CUDA "
            "runtime: CUDA driver version is insufficient for CUDA runtime version)");
  EXPECT_EQ(NoCudaDeviceReason("no CUDA-capable device is detected", 13000, 13000),
            "no CUDA device (CUDA runtime: no CUDA-capable device is detected)");
  EXPECT_EQ(NoCudaDeviceReason("", 13000, 13000), "no CUDA device");
}

}  // namespace
}  // namespace rnnserve::engine
