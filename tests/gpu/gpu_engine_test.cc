// The GPU engine against the CPU engine on random models built in the IR (extra to the
// framework fixtures of gpu_conformance_test.cc): every recurrent path cuDNN runs (cells,
// directions, merge modes, projection, states, both masking semantics), the layers around it,
// the fallbacks, and bad input. Each test skips with its reason where there is no GPU.
//
// Tolerance: both engines are within 1e-5 of the frameworks' float64 answers; they differ from
// each other by summation order only, so CPU-vs-GPU uses rtol 1e-4, atol 1e-5.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/torch_state_dict.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::ActivationKind;
using engine::CellType;
using engine::EngineKind;
using engine::MaskSemantics;
using engine::MergeMode;
using engine::Tensor;

client::NpyArray AsNpy(const Tensor& t) { return client::NpyArray{"<f4", t.shape(), Doubles(t)}; }

struct Case {
  std::string name;
  RandomRnnOptions options;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto add = [&](std::string name, RandomRnnOptions o) { c.push_back({std::move(name), o}); };
  add("LstmKerasMaskedStepsRepeatLastOutput", {});
  add("LstmOnnxZeroPastEnd", {.masking = MaskSemantics::kOnnx});
  add("LstmLastOutputAndStates", {.return_sequences = false, .return_state = true});
  add("LstmProjection", {.proj = 8, .return_state = true});
  add("LstmInitialStates", {.return_state = true, .initial_states = true});
  add("GruResetAfter", {.cell = CellType::kGru});
  add("GruLastOutputAndStateOnnx", {.cell = CellType::kGru,
                                    .return_sequences = false,
                                    .return_state = true,
                                    .masking = MaskSemantics::kOnnx});
  add("SimpleRnnTanh", {.cell = CellType::kSimpleRnn});
  add("SimpleRnnRelu",
      {.cell = CellType::kSimpleRnn, .activation = engine::Activation::Of(ActivationKind::kRelu)});
  add("BidirectionalLstmConcatZeroOutputForMask", {.directions = 2, .zero_output_for_mask = true});
  add("BidirectionalLstmSum",
      {.directions = 2, .merge = MergeMode::kSum, .zero_output_for_mask = true});
  add("BidirectionalGruMul", {.cell = CellType::kGru,
                              .directions = 2,
                              .merge = MergeMode::kMul,
                              .zero_output_for_mask = true});
  add("BidirectionalRnnAve", {.cell = CellType::kSimpleRnn,
                              .directions = 2,
                              .merge = MergeMode::kAve,
                              .zero_output_for_mask = true});
  add("BidirectionalLstmMergeNoneWithStates", {.directions = 2,
                                               .merge = MergeMode::kNone,
                                               .return_state = true,
                                               .zero_output_for_mask = true});
  add("BidirectionalGruLastOutputConcat",
      {.cell = CellType::kGru, .directions = 2, .return_sequences = false});
  add("BidirectionalLstmInitialStatesOnnx", {.directions = 2,
                                             .return_state = true,
                                             .initial_states = true,
                                             .masking = MaskSemantics::kOnnx});
  add("LstmWideHidden", {.input = 64, .hidden = 256, .seed = 7});
  add("GruWideHidden", {.cell = CellType::kGru, .input = 32, .hidden = 512, .seed = 9});
  // Cells cuDNN cannot run: the fused recurrent kernel.
  add("FusedLstmHardSigmoidKeras2",
      {.recurrent_activation = engine::Activation::HardSigmoidKeras2()});
  add("FusedLstmPeepholesClipInputForgetOnnx", {.return_state = true,
                                                .masking = MaskSemantics::kOnnx,
                                                .peepholes = true,
                                                .clip = 0.7f,
                                                .input_forget = true});
  add("FusedLstmProjectionPeepholes", {.proj = 6, .return_state = true, .peepholes = true});
  add("FusedLstmPeepholesInitialStates",
      {.return_state = true, .initial_states = true, .peepholes = true});
  add("FusedBidirectionalLstmHardSigmoidKeras3MergeNone",
      {.directions = 2,
       .merge = MergeMode::kNone,
       .return_state = true,
       .zero_output_for_mask = true,
       .recurrent_activation = engine::Activation::HardSigmoidKeras3()});
  add("FusedGruResetAfterFalse", {.cell = CellType::kGru, .reset_after = false});
  add("FusedBidirectionalGruResetAfterFalseOnnxStates", {.cell = CellType::kGru,
                                                         .directions = 2,
                                                         .return_state = true,
                                                         .initial_states = true,
                                                         .masking = MaskSemantics::kOnnx,
                                                         .reset_after = false,
                                                         .clip = 0.9f});
  // Without clip: both directions on FusedRnn's batch-tiled kernel (one launch).
  add("FusedBidirectionalGruResetAfterFalseSumStates", {.cell = CellType::kGru,
                                                        .directions = 2,
                                                        .merge = MergeMode::kSum,
                                                        .return_state = true,
                                                        .initial_states = true,
                                                        .reset_after = false});
  add("FusedGruHardSigmoidResetAfter",
      {.cell = CellType::kGru, .recurrent_activation = engine::Activation::HardSigmoidKeras3()});
  add("FusedSimpleRnnSoftsign", {.cell = CellType::kSimpleRnn,
                                 .activation = engine::Activation::Of(ActivationKind::kSoftsign)});
  add("FusedLstmGoBackwardsOutputsInProcessingOrder",
      {.lone_reverse = true, .outputs_in_processing_order = true});
  add("FusedGruReverseOnnx", {.cell = CellType::kGru,
                              .return_state = true,
                              .masking = MaskSemantics::kOnnx,
                              .lone_reverse = true});
  add("FusedLstmWideHiddenHardSigmoid",
      {.input = 48,
       .hidden = 300,
       .recurrent_activation = engine::Activation::HardSigmoidKeras2(),
       .seed = 5});
  add("FusedGruWideHiddenResetAfterFalse",
      {.cell = CellType::kGru, .input = 40, .hidden = 260, .reset_after = false, .seed = 6});
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Empty when the CPU engine's GRU matches PyTorch on a committed fixture; otherwise why a
// CPU-vs-GPU GRU comparison would test the CPU engine rather than the GPU one.
std::string CpuGruDisagreesWithPyTorch() {
  static const std::string why = [] {
    const std::string dir = "tests/fixtures/torch/TorchGruTwoLayer/";
    auto model = TorchFixtureModel(dir);
    if (!model.ok()) return std::string();
    auto cpu = CompileOn(EngineKind::kCpu, *model);
    engine::Batch batch{{ToFloatTensor(LoadNpy(dir + "input_0.npy"))}, {}};
    const auto lengths = LoadNpy(dir + "lengths.npy");
    batch.lengths.assign(lengths.values.begin(), lengths.values.end());
    std::vector<Tensor> out;
    if (cpu.ok() && (*cpu)->Run(batch, &out).ok() &&
        AllClose(out[0], LoadNpy(dir + "expected_0.npy"), kFp32Exact)) {
      return std::string();
    }
    return std::string(
        "the CPU engine's GRU does not match PyTorch on tests/fixtures/torch/TorchGruTwoLayer, "
        "so it cannot referee the GPU here; the GPU GRU is held to PyTorch by gpu_torch_test");
  }();
  return why;
}

class GpuMatchesCpuTest : public ::testing::TestWithParam<Case> {};

// Random inputs for every model input: x [B, T, I] and states [B, size].
std::vector<Tensor> RandomInputs(const engine::Model& m, int B, int T, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> in;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    engine::Shape shape = m.inputs[i].shape;
    shape[0] = B;
    if (shape.size() == 3) shape[1] = T;
    in.push_back(Tensor::Float(shape, RandomVector(&rng, engine::NumElements(shape), 1.0f)));
  }
  return in;
}

void ExpectSameOutputs(engine::CompiledModel& gpu, engine::CompiledModel& cpu,
                       const engine::Batch& batch) {
  std::vector<Tensor> g, c;
  const absl::Status cs = cpu.Run(batch, &c);
  ASSERT_TRUE(cs.ok()) << "CPU engine: " << cs;
  const absl::Status s = gpu.Run(batch, &g);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(g.size(), c.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_TRUE(AllClose(g[i], AsNpy(c[i]), kFp32CrossEngine)) << "output " << i;
  }
}

TEST_P(GpuMatchesCpuTest, MixedLengthsAndFullLengths) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  if (GetParam().options.cell == CellType::kGru) {
    if (const std::string why = CpuGruDisagreesWithPyTorch(); !why.empty()) GTEST_SKIP() << why;
  }
  const engine::Model model = RandomRnnModel(GetParam().options);
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*gpu)->placements()[0].engine, "cuda") << (*gpu)->placements()[0].reason;

  engine::Batch mixed{RandomInputs(model, 5, 9, 11), {9, 3, 1, 9, 6}};
  ExpectSameOutputs(**gpu, **cpu, mixed);
  engine::Batch full{RandomInputs(model, 3, 12, 12), {}};
  ExpectSameOutputs(**gpu, **cpu, full);
  // A second batch of the first shape reuses the instance's buffers and gives the same answer.
  ExpectSameOutputs(**gpu, **cpu, mixed);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, GpuMatchesCpuTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GpuEngineTest, HardSigmoidLstmRunsOnFusedKernelAndSaysWhy) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model =
      RandomRnnModel({.recurrent_activation = engine::Activation::HardSigmoidKeras2()});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const auto placements = (*gpu)->placements();
  EXPECT_EQ(placements[0].engine, "cuda");
  EXPECT_TRUE(absl::StrContains(placements[0].reason, "fused CUDA recurrent kernel"))
      << placements[0].reason;
  EXPECT_TRUE(absl::StrContains(placements[0].reason, "hard_sigmoid")) << placements[0].reason;
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok());
  ExpectSameOutputs(**gpu, **cpu, {RandomInputs(model, 4, 6, 3), {6, 2, 5, 1}});
}

TEST(GpuEngineTest, GruResetAfterFalseRunsOnFusedKernelAndSaysWhy) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({.cell = CellType::kGru, .reset_after = false});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->placements()[0].engine, "cuda");
  EXPECT_TRUE(absl::StrContains((*gpu)->placements()[0].reason, "fused CUDA recurrent kernel"));
  EXPECT_TRUE(absl::StrContains((*gpu)->placements()[0].reason, "reset_after"));
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok());
  ExpectSameOutputs(**gpu, **cpu, {RandomInputs(model, 3, 5, 4), {5, 4, 2}});
}

// Both directions of a GRU reset_after=False: batches up to FusedRnn::kMaxBatchedBatch on the
// batch-tiled persistent kernel, as the placement says.
TEST(GpuEngineTest, BidirectionalGruResetAfterFalseRunsOnBatchTiledKernel) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model =
      RandomRnnModel({.cell = CellType::kGru, .directions = 2, .reset_after = false, .seed = 7});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const auto& p = (*gpu)->placements()[0];
  EXPECT_EQ(p.engine, "cuda");
  EXPECT_TRUE(absl::StrContains(p.reason, "batch-tiled persistent kernel")) << p.reason;
  EXPECT_TRUE(absl::StrContains(p.reason, "reset_after")) << p.reason;
}

TEST(GpuEngineTest, SequenceOfLengthZeroMatchesCpu) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({.return_state = true});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  ExpectSameOutputs(**gpu, **cpu, {RandomInputs(model, 3, 5, 5), {5, 0, 2}});
}

// Masked steps inside a sequence (Keras Masking on all-zero steps): cuDNN cannot skip them, the
// fused kernel does, for a cell cuDNN runs and for one it cannot.
TEST(GpuEngineTest, InteriorMaskedStepsRunOnGpuAndMatchCpu) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  for (const bool hard_sigmoid : {false, true}) {
    for (const bool zero_output : {false, true}) {
      RandomRnnOptions o{.directions = zero_output ? 2 : 1,
                         .return_state = true,
                         .zero_output_for_mask = zero_output,
                         .masking_layer = true};
      if (hard_sigmoid) o.recurrent_activation = engine::Activation::HardSigmoidKeras2();
      const engine::Model model = RandomRnnModel(o);
      auto gpu = CompileOn(EngineKind::kCuda, model);
      auto cpu = CompileOn(EngineKind::kCpu, model);
      ASSERT_TRUE(gpu.ok() && cpu.ok());
      EXPECT_EQ((*gpu)->placements()[1].engine, "cuda") << (*gpu)->placements()[1].reason;
      engine::Batch batch{RandomInputs(model, 4, 7, 13), {}};
      // Sequence 0: steps 0 and 3 masked; 1: only the last step valid; 2: steps past 4
      // masked (a shorter length); 3: all masked (length 0).
      float* x = batch.inputs[0].f32();
      const int T = 7, I = 8;
      auto zero_step = [&](int b, int t) { std::fill_n(x + (b * T + t) * I, I, 0.0f); };
      zero_step(0, 0);
      zero_step(0, 3);
      for (int t = 0; t < 6; ++t) zero_step(1, t);
      for (int t = 5; t < 7; ++t) zero_step(2, t);
      for (int t = 0; t < 7; ++t) zero_step(3, t);
      ExpectSameOutputs(**gpu, **cpu, batch);
    }
  }
}

TEST(GpuEngineTest, EmbeddingLstmDenseSoftmaxMatchesCpu) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  engine::Model model = RandomRnnModel({.input = 6, .hidden = 12, .return_sequences = false});
  // ids [B, T] -> Embedding(mask_zero) -> LSTM -> Dense(softmax)
  engine::EmbeddingSpec emb{
      .vocab = 20, .dim = 6, .table = RandomVector(&rng, 120, 1.0f), .mask_zero = true};
  engine::DenseSpec dense{.in = 12,
                          .out = 5,
                          .kernel = RandomVector(&rng, 60, 0.5f),
                          .bias = RandomVector(&rng, 5, 0.5f),
                          .activation = engine::Activation::Of(ActivationKind::kSoftmax)};
  model.inputs[0] = {"ids", engine::DType::kInt64, {-1, -1}};
  model.layers[0].inputs = {2};
  model.layers[0].outputs = {3};
  model.layers.insert(model.layers.begin(), engine::Layer{"emb", "Embedding", emb, {0}, {2}});
  model.layers.push_back(engine::Layer{"dense", "Dense", dense, {3}, {1}});
  model.output_values = {1};
  model.num_values = 4;
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (const auto& p : (*gpu)->placements()) EXPECT_EQ(p.engine, "cuda") << p.layer;
  std::vector<int64_t> ids = {3, 7, 1, 0, 0, 5, 9, 12, 4, 19, 2, 0, 0, 0, 0};
  engine::Batch batch{{Tensor::Int64({3, 5}, ids)}, {}};
  ExpectSameOutputs(**gpu, **cpu, batch);
}

// Batch::stop (engine/engine.h): asked before the run and between layers; a run it stops
// returns CANCELLED, and the instance then answers the next batch as the CPU engine does.
TEST(GpuEngineTest, StopBetweenLayersEndsTheRunCancelledAndTheNextRunMatchesCpu) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  // x [B, T, 8] -> LSTM(16), last output -> Dense(4): two layers, never stacked.
  engine::Model model = RandomRnnModel({.input = 8, .hidden = 16, .return_sequences = false});
  engine::DenseSpec dense{.in = 16,
                          .out = 4,
                          .kernel = RandomVector(&rng, 64, 0.5f),
                          .bias = RandomVector(&rng, 4, 0.5f),
                          .activation = engine::Activation::Of(ActivationKind::kTanh)};
  model.layers.push_back(engine::Layer{"dense", "Dense", dense, {1}, {2}});
  model.output_values = {2};
  model.num_values = 3;
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  engine::Batch batch{RandomInputs(model, 3, 200, 32), {}};
  int asked = 0;
  batch.stop = [&asked] { return ++asked >= 2; };  // wanted at the start, not after the LSTM
  std::vector<Tensor> out;
  const absl::Status s = (*gpu)->Run(batch, &out);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(asked, 2);
  EXPECT_TRUE(absl::StrContains(s.message(), "dense")) << s;

  // A stop that never says stop changes nothing; nor does the stopped run before it.
  asked = 0;
  batch.stop = [&asked] {
    ++asked;
    return false;
  };
  ExpectSameOutputs(**gpu, **cpu, batch);
  EXPECT_GE(asked, 1);
  batch.stop = nullptr;
  ExpectSameOutputs(**gpu, **cpu, batch);
}

TEST(GpuEngineTest, WrongFeatureWidthIsInvalidArgumentNamingTheLayer) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok());
  std::vector<Tensor> out;
  const absl::Status s = (*gpu)->Run({{Tensor::Float({2, 4, 3})}, {}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "rnn")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[B,T,8]")) << s;
}

TEST(GpuEngineTest, LengthBeyondTimeStepsIsInvalidArgument) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok());
  std::vector<Tensor> out;
  const absl::Status s = (*gpu)->Run({{Tensor::Float({2, 4, 8})}, {4, 5}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(GpuEngineTest, MemoryBytesCoverDeviceWeightsAndStayFlatAcrossBatches) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({.input = 32, .hidden = 64});
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(gpu.ok());
  const int64_t weight_bytes = 4 * (4 * 64 * (32 + 64) + 2 * 4 * 64);
  EXPECT_GE((*gpu)->memory_bytes(), weight_bytes);
  std::vector<Tensor> out;
  const engine::Batch batch{RandomInputs(model, 8, 10, 1), {}};
  ASSERT_TRUE((*gpu)->Run(batch, &out).ok());
  const int64_t after_first = (*gpu)->memory_bytes();
  ASSERT_TRUE((*gpu)->Run(batch, &out).ok());
  EXPECT_EQ((*gpu)->memory_bytes(), after_first);
}

TEST(GpuEngineTest, ReducedPrecisionModesStayWithinStatedBounds) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  // Relative L2 error against the exact FP32 CPU engine after 50 steps of an H=128 LSTM.
  // TF32 rounds GEMM inputs to 10 mantissa bits, FP16 stores data and weights in 10, BF16 in 7;
  // all accumulate in FP32.
  const engine::Model model = RandomRnnModel({.input = 64, .hidden = 128, .seed = 5});
  auto cpu = CompileOn(EngineKind::kCpu, model);
  ASSERT_TRUE(cpu.ok());
  const engine::Batch batch{RandomInputs(model, 4, 50, 8), {50, 31, 7, 50}};
  std::vector<Tensor> want;
  ASSERT_TRUE((*cpu)->Run(batch, &want).ok());
  for (const ReducedPrecisionBound& m : kReducedPrecisionBounds) {
    auto gpu = CompileOn(EngineKind::kCuda, model, m.mode);
    ASSERT_TRUE(gpu.ok()) << m.name << ": " << gpu.status();
    std::vector<Tensor> got;
    const absl::Status s = (*gpu)->Run(batch, &got);
    ASSERT_TRUE(s.ok()) << m.name << ": " << s;
    const double err = RelativeError(got[0], Doubles(want[0]));
    EXPECT_LE(err, m.relative_l2) << m.name;
    std::cout << "[ mode ] " << m.name << " relative L2 error " << err << " (bound "
              << m.relative_l2 << ")\n";
  }
}

TEST(GpuEngineTest, CreateNamesAMissingDevice) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  auto e = engine::Engine::Create({.kind = EngineKind::kCuda, .device = 999});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(e.status().message(), "999")) << e.status();
}

}  // namespace
}  // namespace rnnserve::testing
