// The GPU engine's non-recurrent layers (device_layers.h) against the CPU engine's, one layer
// per model, on the edge cases the framework fixtures do not reach: causal and dilated
// convolutions, SAME pooling with strides, global pooling over masks with gaps, broadcast
// merges of three inputs, every ONNX layout op, batched MatMul, transposed Gemm, reductions,
// and INT64 shape arithmetic staying on the host. The CPU engine is held to the frameworks by
// the conformance tests; here the GPU engine is held to it (rtol 1e-4, atol 1e-5: the engines
// differ in summation order only). Each layer must be placed on the device and the run must
// copy nothing back to the host between layers. Skips with its reason where there is no GPU.

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "engine/cuda/cuda_model.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::DType;
using engine::Layer;
using engine::Model;
using engine::Tensor;
using engine::TensorOperand;
using engine::TensorOpKind;
using engine::TensorOpSpec;

Tensor RandomFloat(std::mt19937* rng, engine::Shape shape) {
  Tensor t = Tensor::Float(shape);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = u(*rng);
  return t;
}

TensorOperand Const(Tensor t) {
  return {.source = TensorOperand::Source::kConstant, .constant = std::move(t)};
}
TensorOperand Input() { return {}; }
Tensor Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::Int64({n}, std::move(v));
}

// A model of one layer reading inputs 0..n_inputs-1 and writing n_outputs values.
Model OneLayer(engine::LayerSpec spec, const std::vector<Tensor>& inputs, int n_outputs = 1) {
  Model m;
  m.name = "one_layer";
  Layer layer{"layer", "Test", std::move(spec), {}, {}};
  for (size_t i = 0; i < inputs.size(); ++i) {
    m.inputs.push_back({"in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()});
    layer.inputs.push_back(static_cast<int>(i));
  }
  for (int o = 0; o < n_outputs; ++o) {
    const int id = static_cast<int>(inputs.size()) + o;
    layer.outputs.push_back(id);
    m.output_values.push_back(id);
    m.outputs.push_back({"out" + std::to_string(o), DType::kFloat32, {}});
  }
  m.layers.push_back(std::move(layer));
  m.num_values = static_cast<int>(inputs.size()) + n_outputs;
  return m;
}

// Runs `model` on both engines; the GPU's layer must be on the device and copy nothing back.
void ExpectGpuMatchesCpu(const Model& model, engine::Batch batch, bool on_device = true) {
  auto gpu = CompileOn(engine::EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CompileOn(engine::EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<Tensor> g, c;
  const absl::Status cs = (*cpu)->Run(batch, &c);
  ASSERT_TRUE(cs.ok()) << "CPU engine: " << cs;
  const absl::Status gs = (*gpu)->Run(batch, &g);
  ASSERT_TRUE(gs.ok()) << gs;
  ASSERT_EQ(g.size(), c.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].shape(), c[i].shape()) << "output " << i;
    EXPECT_EQ(g[i].dtype(), c[i].dtype()) << "output " << i;
    if (g[i].shape() != c[i].shape() || c[i].dtype() != DType::kFloat32) continue;
    EXPECT_TRUE(
        AllClose(g[i], client::NpyArray{"<f4", c[i].shape(), Doubles(c[i])}, kFp32CrossEngine))
        << "output " << i;
  }
  for (const auto& p : (*gpu)->placements()) {
    EXPECT_EQ(p.engine, on_device ? "cuda" : "cpu") << p.layer << ": " << p.reason;
  }
  EXPECT_EQ((*gpu)->counters().host_copies_in_last_run, 0);
}

class GpuLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = NoGpuReason(); !why.empty()) {
      GTEST_SKIP() << "needs a GPU and the CUDA engine: " << why;
    }
  }
  std::mt19937 rng_{7};
};

TEST_F(GpuLayersTest, Conv1DEveryPadding) {
  using P = engine::Conv1DSpec::Padding;
  const struct {
    P padding;
    int stride, dilation, kernel;
    engine::ActivationKind act;
  } cases[] = {{P::kValid, 1, 1, 3, engine::ActivationKind::kRelu},
               {P::kSame, 2, 1, 4, engine::ActivationKind::kTanh},
               {P::kCausal, 1, 2, 3, engine::ActivationKind::kLinear},
               {P::kSame, 1, 3, 2, engine::ActivationKind::kSoftmax},
               {P::kValid, 3, 1, 9, engine::ActivationKind::kSigmoid}};  // longer than T
  for (const auto& c : cases) {
    engine::Conv1DSpec spec{.in_channels = 5,
                            .out_channels = 7,
                            .kernel_size = c.kernel,
                            .stride = c.stride,
                            .dilation = c.dilation,
                            .padding = c.padding,
                            .kernel = RandomVector(&rng_, size_t(c.kernel) * 5 * 7, 0.5f),
                            .bias = RandomVector(&rng_, 7, 0.5f),
                            .activation = engine::Activation::Of(c.act)};
    const Tensor x = RandomFloat(&rng_, {3, 8, 5});
    SCOPED_TRACE(c.kernel);
    ExpectGpuMatchesCpu(OneLayer(spec, {x}), {{x}, {}});
  }
}

TEST_F(GpuLayersTest, PoolingWithStridesAndSamePadding) {
  for (auto kind : {engine::Pool1DSpec::Kind::kMax, engine::Pool1DSpec::Kind::kAverage}) {
    for (bool same : {false, true}) {
      engine::Pool1DSpec spec{.kind = kind, .pool_size = 3, .stride = 2, .same_padding = same};
      const Tensor x = RandomFloat(&rng_, {2, 9, 4});
      ExpectGpuMatchesCpu(OneLayer(spec, {x}), {{x}, {}});
    }
  }
}

TEST_F(GpuLayersTest, GlobalPoolingOverMasksWithGaps) {
  // Masking (on the host, where the input is) -> GlobalAveragePooling1D: lengths and an
  // interior masked step reach the device kernel.
  Tensor x = RandomFloat(&rng_, {3, 6, 4});
  for (int c = 0; c < 4; ++c) {
    x.f32()[(0 * 6 + 2) * 4 + c] = 0.0f;  // sequence 0: step 2 masked inside
    x.f32()[(1 * 6 + 4) * 4 + c] = 0.0f;  // sequence 1: length 4
    x.f32()[(1 * 6 + 5) * 4 + c] = 0.0f;
  }
  for (auto kind :
       {engine::GlobalPool1DSpec::Kind::kAverage, engine::GlobalPool1DSpec::Kind::kMax}) {
    Model m = OneLayer(engine::GlobalPool1DSpec{.kind = kind}, {x});
    m.layers[0].inputs = {2};
    m.layers.insert(m.layers.begin(), Layer{"mask", "Masking", engine::MaskingSpec{}, {0}, {2}});
    m.num_values = 3;
    auto gpu = CompileOn(engine::EngineKind::kCuda, m);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu = CompileOn(engine::EngineKind::kCpu, m);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    std::vector<Tensor> g, c;
    ASSERT_TRUE((*cpu)->Run({{x}, {}}, &c).ok());
    const absl::Status s = (*gpu)->Run({{x}, {}}, &g);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(
        AllClose(g[0], client::NpyArray{"<f4", c[0].shape(), Doubles(c[0])}, kFp32CrossEngine));
    EXPECT_EQ((*gpu)->placements()[1].engine, "cuda");
  }
}

TEST_F(GpuLayersTest, NormalisationLayers) {
  const Tensor x = RandomFloat(&rng_, {2, 5, 6});
  engine::BatchNormSpec bn{.gamma = RandomVector(&rng_, 6, 1.0f),
                           .beta = RandomVector(&rng_, 6, 1.0f),
                           .mean = RandomVector(&rng_, 6, 1.0f),
                           .variance = std::vector<float>(6, 0.7f)};
  ExpectGpuMatchesCpu(OneLayer(bn, {x}), {{x}, {}});
  ExpectGpuMatchesCpu(OneLayer(engine::LayerNormSpec{.gamma = RandomVector(&rng_, 6, 1.0f),
                                                     .beta = RandomVector(&rng_, 6, 1.0f)},
                               {x}),
                      {{x}, {}});
  ExpectGpuMatchesCpu(OneLayer(engine::LayerNormSpec{.epsilon = 1e-5f}, {x}), {{x}, {}});
  ExpectGpuMatchesCpu(OneLayer(engine::SoftmaxSpec{.axis = 1}, {x}), {{x}, {}});
  ExpectGpuMatchesCpu(OneLayer(engine::SoftmaxSpec{.axis = -1}, {x}), {{x}, {}});
}

TEST_F(GpuLayersTest, ShapeLayersAndMerges) {
  const Tensor x = RandomFloat(&rng_, {2, 3, 4});
  ExpectGpuMatchesCpu(OneLayer(engine::FlattenSpec{}, {x}), {{x}, {}});
  ExpectGpuMatchesCpu(OneLayer(engine::ReshapeSpec{.target = {4, -1}}, {x}), {{x}, {}});
  const Tensor v = RandomFloat(&rng_, {2, 5});
  ExpectGpuMatchesCpu(OneLayer(engine::RepeatVectorSpec{.n = 3}, {v}), {{v}, {}});
  const Tensor y = RandomFloat(&rng_, {2, 5, 4}), z = RandomFloat(&rng_, {2, 1, 4});
  ExpectGpuMatchesCpu(
      OneLayer(engine::MergeSpec{.kind = engine::MergeSpec::Kind::kConcatenate, .axis = 1}, {x, y}),
      {{x, y}, {}});
  const Tensor w = RandomFloat(&rng_, {2, 3, 1});
  using K = engine::MergeSpec::Kind;
  for (K kind : {K::kAdd, K::kMultiply, K::kAverage, K::kMaximum, K::kMinimum}) {
    ExpectGpuMatchesCpu(OneLayer(engine::MergeSpec{.kind = kind}, {x, z, w}), {{x, z, w}, {}});
  }
  ExpectGpuMatchesCpu(OneLayer(engine::MergeSpec{.kind = K::kSubtract}, {x, w}), {{x, w}, {}});
}

TEST_F(GpuLayersTest, OnnxLayoutOps) {
  const Tensor x = RandomFloat(&rng_, {2, 3, 4});
  auto op = [](TensorOpKind kind, std::vector<TensorOperand> operands) {
    return TensorOpSpec{.kind = kind, .operands = std::move(operands)};
  };
  TensorOpSpec transpose = op(TensorOpKind::kTranspose, {Input()});
  transpose.ints = {1, 2, 0};
  ExpectGpuMatchesCpu(OneLayer(transpose, {x}), {{x}, {}});
  // Slice with a negative step on axis 2 and a clamped end on axis 1.
  ExpectGpuMatchesCpu(
      OneLayer(op(TensorOpKind::kSlice, {Input(), Const(Ints({3, 0})), Const(Ints({-5, 9})),
                                         Const(Ints({2, 1})), Const(Ints({-1, 2}))}),
               {x}),
      {{x}, {}});
  TensorOpSpec gather = op(TensorOpKind::kGather, {Input(), Const(Ints({2, -3, 0}))});
  gather.axis = 1;
  ExpectGpuMatchesCpu(OneLayer(gather, {x}), {{x}, {}});
  TensorOpSpec split = op(TensorOpKind::kSplit, {Input()});
  split.axis = 2;
  split.ints = {1, 3};
  ExpectGpuMatchesCpu(OneLayer(split, {x}, 2), {{x}, {}});
  const Tensor b = RandomFloat(&rng_, {3, 1});
  ExpectGpuMatchesCpu(OneLayer(op(TensorOpKind::kExpand, {Input(), Const(Ints({2, 3, 5}))}), {b}),
                      {{b}, {}});
  TensorOpSpec concat =
      op(TensorOpKind::kConcat, {Input(), Input(), Const(RandomFloat(&rng_, {2, 3, 2}))});
  concat.axis = -1;
  ExpectGpuMatchesCpu(OneLayer(concat, {x, x}), {{x, x}, {}});
  ExpectGpuMatchesCpu(OneLayer(op(TensorOpKind::kReshape, {Input(), Const(Ints({0, -1}))}), {x}),
                      {{x}, {}});
  TensorOpSpec unsqueeze = op(TensorOpKind::kUnsqueeze, {Input()});
  unsqueeze.ints = {0, 4};
  ExpectGpuMatchesCpu(OneLayer(unsqueeze, {x}), {{x}, {}});
}

TEST_F(GpuLayersTest, OnnxArithmetic) {
  const Tensor x = RandomFloat(&rng_, {2, 3, 4});
  const Tensor pos = [&] {
    Tensor t = RandomFloat(&rng_, {3, 1});
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = std::abs(t.f32()[i]) + 0.5f;
    return t;
  }();
  for (TensorOpKind kind : {TensorOpKind::kAdd, TensorOpKind::kSub, TensorOpKind::kMul,
                            TensorOpKind::kDiv, TensorOpKind::kMin, TensorOpKind::kMax}) {
    ExpectGpuMatchesCpu(
        OneLayer(TensorOpSpec{.kind = kind, .operands = {Input(), Input()}}, {x, pos}),
        {{x, pos}, {}});
  }
  ExpectGpuMatchesCpu(
      OneLayer(TensorOpSpec{.kind = TensorOpKind::kPow,
                            .operands = {Input(), Const(Tensor::Float({}, {2.0f}))}},
               {pos}),
      {{pos}, {}});
  for (TensorOpKind kind : {TensorOpKind::kNeg, TensorOpKind::kAbs, TensorOpKind::kSqrt,
                            TensorOpKind::kExp, TensorOpKind::kLog, TensorOpKind::kReciprocal}) {
    ExpectGpuMatchesCpu(OneLayer(TensorOpSpec{.kind = kind, .operands = {Input()}}, {pos}),
                        {{pos}, {}});
  }
  ExpectGpuMatchesCpu(
      OneLayer(TensorOpSpec{.kind = TensorOpKind::kActivation,
                            .operands = {Input()},
                            .activation = engine::Activation::Of(engine::ActivationKind::kElu)},
               {x}),
      {{x}, {}});
  for (TensorOpKind kind : {TensorOpKind::kSoftmax, TensorOpKind::kLogSoftmax}) {
    for (bool coerce : {false, true}) {
      ExpectGpuMatchesCpu(
          OneLayer(
              TensorOpSpec{.kind = kind, .operands = {Input()}, .axis = 1, .coerce_2d = coerce},
              {x}),
          {{x}, {}});
    }
  }
  for (TensorOpKind kind :
       {TensorOpKind::kReduceMean, TensorOpKind::kReduceSum, TensorOpKind::kReduceMax}) {
    for (bool keep : {false, true}) {
      ExpectGpuMatchesCpu(
          OneLayer(
              TensorOpSpec{.kind = kind, .operands = {Input()}, .ints = {0, 2}, .keep_dims = keep},
              {x}),
          {{x}, {}});
    }
  }
}

TEST_F(GpuLayersTest, OnnxMatMulAndGemm) {
  const Tensor a = RandomFloat(&rng_, {2, 3, 4});
  // [2,3,4] x [4,5] (one weight for every batch), x [2,4,5] (batched), x [1,4,5] (broadcast).
  for (engine::Shape bs : {engine::Shape{4, 5}, engine::Shape{2, 4, 5}, engine::Shape{1, 4, 5}}) {
    const Tensor b = RandomFloat(&rng_, bs);
    ExpectGpuMatchesCpu(
        OneLayer(TensorOpSpec{.kind = TensorOpKind::kMatMul, .operands = {Input(), Const(b)}}, {a}),
        {{a}, {}});
  }
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor ga = RandomFloat(&rng_, ta ? engine::Shape{4, 3} : engine::Shape{3, 4});
      const Tensor gb = RandomFloat(&rng_, tb ? engine::Shape{5, 4} : engine::Shape{4, 5});
      ExpectGpuMatchesCpu(
          OneLayer(TensorOpSpec{.kind = TensorOpKind::kGemm,
                                .operands = {Input(), Const(gb), Const(RandomFloat(&rng_, {5}))},
                                .trans_a = ta,
                                .trans_b = tb,
                                .alpha = 0.5f,
                                .beta = 2.0f},
                   {ga}),
          {{ga}, {}});
    }
  }
}

TEST_F(GpuLayersTest, Int64ShapeArithmeticStaysOnTheHost) {
  // Shape reads only the shape of device data; Gather over its INT64 result runs on the host,
  // where that tensor is, and nothing is copied back from the device.
  const Tensor x = RandomFloat(&rng_, {2, 3, 4});
  Model m = OneLayer(TensorOpSpec{.kind = TensorOpKind::kShape, .operands = {Input()}}, {x});
  m.layers.push_back(
      Layer{"gather",
            "Gather",
            TensorOpSpec{.kind = TensorOpKind::kGather, .operands = {Input(), Const(Ints({2}))}},
            {1},
            {2}});
  m.output_values = {2};
  m.num_values = 3;
  auto gpu = CompileOn(engine::EngineKind::kCuda, m);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<Tensor> out;
  ASSERT_TRUE((*gpu)->Run({{x}, {}}, &out).ok());
  ASSERT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(out[0].i64()[0], 4);
  EXPECT_EQ((*gpu)->counters().host_copies_in_last_run, 0);
}

TEST_F(GpuLayersTest, BadInputNamesTheLayerAndTheExpectedShape) {
  engine::Conv1DSpec conv{.in_channels = 5,
                          .out_channels = 2,
                          .kernel_size = 2,
                          .kernel = RandomVector(&rng_, 20, 0.5f)};
  const Tensor wrong = RandomFloat(&rng_, {2, 4, 3});
  auto gpu = CompileOn(engine::EngineKind::kCuda, OneLayer(conv, {wrong}));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<Tensor> out;
  absl::Status s = (*gpu)->Run({{wrong}, {}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "layer 'layer'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[B,T,5]")) << s;
  TensorOpSpec gather{.kind = TensorOpKind::kGather, .operands = {Input(), Const(Ints({7}))}};
  gpu = CompileOn(engine::EngineKind::kCuda, OneLayer(gather, {wrong}));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  s = (*gpu)->Run({{wrong}, {}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "index 7 outside [-2, 2)")) << s;
  // The same instance serves the next batch, where index 7 is inside axis 0.
  const Tensor longer = RandomFloat(&rng_, {8, 4, 3});
  s = (*gpu)->Run({{longer}, {}}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].shape(), (engine::Shape{1, 4, 3}));
  EXPECT_EQ(out[0].f32()[0], longer.f32()[7 * 12]);
}

}  // namespace
}  // namespace rnnserve::testing
