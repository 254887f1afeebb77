// The layers around RNNs against Keras 3 (float64): Softmax on any axis, BatchNormalization
// and LayerNormalization at inference, Conv1D (valid/same/causal, stride, dilation),
// Max/AveragePooling1D (valid/same as TensorFlow pads), GlobalMax/GlobalAveragePooling1D
// behind Masking, Flatten, Reshape, RepeatVector and the functional merges.

#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/cpu_test_util.h"

namespace rnnserve {
namespace {

using cpu_test::Case;
using cpu_test::Floats;
using cpu_test::LoadCase;
using engine::Tensor;
using testing::AllClose;
using testing::ToFloatTensor;

// One layer over the case's inputs ("x", or "a" and "b"), optionally behind Masking(0).
absl::StatusOr<Tensor> RunOne(const Case& c, engine::LayerSpec spec, bool masked = false) {
  engine::Model m;
  m.name = "layer_case";
  std::vector<Tensor> inputs;
  for (const char* key : {"x", "a", "b"}) {
    if (!c.count(key)) continue;
    inputs.push_back(ToFloatTensor(c.at(key)));
    m.inputs.push_back({key, engine::DType::kFloat32, {}});
  }
  int next = static_cast<int>(inputs.size());
  std::vector<int> layer_in;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) layer_in.push_back(i);
  if (masked) {
    m.layers.push_back({"masking", "Masking", engine::MaskingSpec{0.0f}, {0}, {next}});
    layer_in = {next++};
  }
  m.layers.push_back({"layer", "Layer", std::move(spec), layer_in, {next}});
  m.outputs = {{"y", engine::DType::kFloat32, {}}};
  m.output_values = {next};
  m.num_values = next + 1;
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(m, {});
  if (!compiled.ok()) return compiled.status();
  engine::Batch batch;
  batch.inputs = std::move(inputs);
  std::vector<Tensor> out;
  if (auto s = (*compiled)->Run(batch, &out); !s.ok()) return s;
  return out[0];
}

void Expect(const std::string& name, engine::LayerSpec spec, bool masked = false) {
  SCOPED_TRACE(name);
  const Case c = LoadCase(name);
  ASSERT_FALSE(c.empty());
  auto y = RunOne(c, std::move(spec), masked);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), c.at("y").shape);
  EXPECT_TRUE(AllClose(*y, c.at("y")));
}

TEST(CpuLayers, SoftmaxOverTimeAndLastAxis) {
  Expect("SoftmaxOverTimeAxis", engine::SoftmaxSpec{.axis = 1});
  Expect("SoftmaxOverLastAxis", engine::SoftmaxSpec{.axis = -1});
}

TEST(CpuLayers, BatchNormUsesMovingStatistics) {
  const Case c = LoadCase("BatchNormInference");
  Expect("BatchNormInference", engine::BatchNormSpec{.gamma = Floats(c, "gamma"),
                                                     .beta = Floats(c, "beta"),
                                                     .mean = Floats(c, "mean"),
                                                     .variance = Floats(c, "var"),
                                                     .epsilon = 1e-3f});
}

TEST(CpuLayers, LayerNormOverLastAxis) {
  const Case c = LoadCase("LayerNormLastAxis");
  Expect("LayerNormLastAxis",
         engine::LayerNormSpec{
             .gamma = Floats(c, "gamma"), .beta = Floats(c, "beta"), .epsilon = 1e-3f});
}

TEST(CpuLayers, Conv1DValidSameCausalStrideDilation) {
  struct Conv {
    const char* pad;
    int k, s, d;
    engine::Conv1DSpec::Padding padding;
  };
  using P = engine::Conv1DSpec::Padding;
  const Conv convs[] = {{"valid", 3, 1, 1, P::kValid},   {"valid", 3, 2, 1, P::kValid},
                        {"same", 4, 1, 1, P::kSame},     {"same", 3, 2, 1, P::kSame},
                        {"same", 3, 1, 2, P::kSame},     {"causal", 3, 1, 1, P::kCausal},
                        {"causal", 2, 1, 3, P::kCausal}, {"causal", 3, 2, 1, P::kCausal}};
  for (const Conv& cv : convs) {
    const std::string name = std::string("Conv1D_") + cv.pad + "_k" + std::to_string(cv.k) + "_s" +
                             std::to_string(cv.s) + "_d" + std::to_string(cv.d);
    const Case c = LoadCase(name);
    ASSERT_FALSE(c.empty()) << name;
    engine::Conv1DSpec spec;
    spec.in_channels = static_cast<int>(c.at("kernel").shape[1]);
    spec.out_channels = static_cast<int>(c.at("kernel").shape[2]);
    spec.kernel_size = cv.k;
    spec.stride = cv.s;
    spec.dilation = cv.d;
    spec.padding = cv.padding;
    spec.kernel = Floats(c, "kernel");
    spec.bias = Floats(c, "bias");
    spec.activation = engine::Activation::Of(engine::ActivationKind::kTanh);
    Expect(name, spec);
  }
}

TEST(CpuLayers, Pool1DMaxAndAverageValidAndSame) {
  struct Pool {
    const char* pad;
    int p, s;
  };
  const Pool pools[] = {{"valid", 2, 2}, {"valid", 3, 2}, {"same", 2, 2},
                        {"same", 3, 2},  {"same", 4, 3},  {"valid", 3, 1}};
  for (const char* kind : {"max", "avg"}) {
    for (const Pool& p : pools) {
      const std::string name = std::string("Pool1D_") + kind + "_" + p.pad + "_p" +
                               std::to_string(p.p) + "_s" + std::to_string(p.s);
      engine::Pool1DSpec spec;
      spec.kind = std::string(kind) == "max" ? engine::Pool1DSpec::Kind::kMax
                                             : engine::Pool1DSpec::Kind::kAverage;
      spec.pool_size = p.p;
      spec.stride = p.s;
      spec.same_padding = std::string(p.pad) == "same";
      Expect(name, spec);
    }
  }
}

TEST(CpuLayers, GlobalAveragePoolingSkipsMaskedSteps) {
  Expect("GlobalPool_avg_masked",
         engine::GlobalPool1DSpec{.kind = engine::GlobalPool1DSpec::Kind::kAverage}, true);
}

TEST(CpuLayers, GlobalMaxPoolingBehindMaskingMatchesKeras) {
  Expect("GlobalPool_max_masked",
         engine::GlobalPool1DSpec{.kind = engine::GlobalPool1DSpec::Kind::kMax}, true);
}

TEST(CpuLayers, FlattenReshapeRepeatVector) {
  Expect("FlattenKeepsBatch", engine::FlattenSpec{});
  Expect("ReshapeWithFreeAxis", engine::ReshapeSpec{.target = {3, -1}});
  Expect("RepeatVectorTiles", engine::RepeatVectorSpec{.n = 5});
}

TEST(CpuLayers, ConcatenateOnLastAndTimeAxis) {
  Expect("ConcatenateLastAxis", engine::MergeSpec{.kind = engine::MergeSpec::Kind::kConcatenate});
  Expect("ConcatenateTimeAxis",
         engine::MergeSpec{.kind = engine::MergeSpec::Kind::kConcatenate, .axis = 1});
}

TEST(CpuLayers, ElementwiseMerges) {
  using K = engine::MergeSpec::Kind;
  const std::pair<const char*, K> merges[] = {
      {"Add", K::kAdd},         {"Subtract", K::kSubtract}, {"Multiply", K::kMultiply},
      {"Average", K::kAverage}, {"Maximum", K::kMaximum},   {"Minimum", K::kMinimum}};
  for (const auto& [name, kind] : merges) {
    Expect(std::string("Merge") + name, engine::MergeSpec{.kind = kind});
  }
}

TEST(CpuLayersErrors, ReshapeToWrongSizeNamesLayerAndTarget) {
  const Case c = LoadCase("FlattenKeepsBatch");
  auto y = RunOne(c, engine::ReshapeSpec{.target = {5, -1}});
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("'layer'"), std::string::npos) << y.status();
  EXPECT_NE(y.status().message().find("[B,5,-1]"), std::string::npos) << y.status();
}

TEST(CpuLayersErrors, ConvKernelOfWrongSizeFailsAtCompile) {
  const Case c = LoadCase("Conv1D_valid_k3_s1_d1");
  engine::Conv1DSpec spec{.in_channels = 4, .out_channels = 5, .kernel_size = 2};
  spec.kernel = Floats(c, "kernel");  // [3, 4, 5], not [2, 4, 5]
  auto y = RunOne(c, spec);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("expected 40"), std::string::npos) << y.status();
}

TEST(CpuLayersErrors, MergeOfMismatchedShapesNamesBoth) {
  const Case c = LoadCase("ConcatenateLastAxis");
  auto y = RunOne(c, engine::MergeSpec{.kind = engine::MergeSpec::Kind::kAdd});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("[3,9,4]"), std::string::npos) << y.status();
  EXPECT_NE(y.status().message().find("[3,9,2]"), std::string::npos) << y.status();
}

}  // namespace
}  // namespace rnnserve
