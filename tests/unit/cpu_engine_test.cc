// The CPU engine's model-level contract: initial states from the Batch by layer name, final
// states out, a sequence run in two chunks equals PyTorch's run of the whole, and bad models
// or requests fail with errors that name the layer and the expected value.

#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/cpu_test_util.h"

namespace rnnserve {
namespace {

using cpu_test::Case;
using cpu_test::Direction;
using cpu_test::LoadCase;
using cpu_test::Slice;
using engine::Tensor;
using testing::AllClose;
using testing::ToFloatTensor;

// input -> LSTM (PyTorch's weights, ONNX semantics), returning the sequence.
engine::Model TorchLstmModel(const Case& c) {
  engine::RecurrentSpec spec;
  spec.cell = engine::CellType::kLstm;
  spec.input_size = static_cast<int>(c.at("W0").shape[1]);
  spec.hidden_size = static_cast<int>(c.at("W0").shape[0]) / 4;
  spec.return_sequences = true;
  spec.masking = engine::MaskSemantics::kOnnx;
  spec.directions.push_back(Direction(c, 0));
  engine::Model m;
  m.name = "torch_lstm";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, spec.input_size}});
  m.layers.push_back({"lstm", "LSTM", spec, {0}, {1}});
  m.outputs.push_back({"y", engine::DType::kFloat32, {}});
  m.output_values = {1};
  m.num_values = 2;
  return m;
}

std::unique_ptr<engine::CompiledModel> Compile(const engine::Model& m) {
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(m, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

// Steps [t0, t1) of x [B, T, F].
Tensor Steps(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.dim(0), T = x.dim(1), F = x.dim(2);
  Tensor out = Tensor::Float({B, t1 - t0, F});
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(x.f32() + (b * T + t0) * F, (t1 - t0) * F, out.f32() + b * (t1 - t0) * F);
  }
  return out;
}

TEST(CpuEngine, InitialStatesByLayerNameAndFinalStatesMatchPyTorch) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TorchLstmModel(c));
  ASSERT_NE(compiled, nullptr);
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(c.at("x")));
  batch.lengths = cpu_test::Lengths(c);
  batch.initial_states["lstm"] = {ToFloatTensor(Slice(c.at("h0"), 0)),
                                  ToFloatTensor(Slice(c.at("c0"), 0))};
  std::map<std::string, std::vector<Tensor>> finals;
  batch.final_states = &finals;
  std::vector<Tensor> out;
  ASSERT_TRUE(compiled->Run(batch, &out).ok());
  EXPECT_TRUE(AllClose(out[0], c.at("y")));
  ASSERT_EQ(finals.count("lstm"), 1u);
  ASSERT_EQ(finals["lstm"].size(), 2u);
  EXPECT_TRUE(AllClose(finals["lstm"][0], Slice(c.at("hN"), 0)));
  EXPECT_TRUE(AllClose(finals["lstm"][1], Slice(c.at("cN"), 0)));
}

TEST(CpuEngine, TwoChunksCarryingStatesEqualPyTorchOnTheWholeSequence) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TorchLstmModel(c));
  ASSERT_NE(compiled, nullptr);
  const Tensor x = ToFloatTensor(c.at("x"));
  const std::vector<int32_t> lengths = cpu_test::Lengths(c);
  const int64_t T = x.dim(1), split = 3, H = 7;
  std::vector<Tensor> states = {ToFloatTensor(Slice(c.at("h0"), 0)),
                                ToFloatTensor(Slice(c.at("c0"), 0))};
  std::vector<Tensor> chunks;
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, split}, {split, T}}) {
    engine::Batch batch;
    batch.inputs.push_back(Steps(x, t0, t1));
    for (int32_t len : lengths) {
      batch.lengths.push_back(static_cast<int32_t>(std::clamp<int64_t>(len - t0, 0, t1 - t0)));
    }
    batch.initial_states["lstm"] = states;
    std::map<std::string, std::vector<Tensor>> finals;
    batch.final_states = &finals;
    std::vector<Tensor> out;
    ASSERT_TRUE(compiled->Run(batch, &out).ok());
    chunks.push_back(std::move(out[0]));
    states = finals["lstm"];
  }
  Tensor whole = Tensor::Float({x.dim(0), T, H});
  for (int64_t b = 0; b < x.dim(0); ++b) {
    std::copy_n(chunks[0].f32() + b * split * H, split * H, whole.f32() + b * T * H);
    std::copy_n(chunks[1].f32() + b * (T - split) * H, (T - split) * H,
                whole.f32() + (b * T + split) * H);
  }
  EXPECT_TRUE(AllClose(whole, c.at("y")));
  EXPECT_TRUE(AllClose(states[0], Slice(c.at("hN"), 0)));
  EXPECT_TRUE(AllClose(states[1], Slice(c.at("cN"), 0)));
}

TEST(CpuEngine, InitialStatesForAnUnknownLayerAreRejected) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TorchLstmModel(c));
  ASSERT_NE(compiled, nullptr);
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(c.at("x")));
  batch.initial_states["lstm_9"] = {};
  std::vector<Tensor> out;
  const auto s = compiled->Run(batch, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lstm_9"), std::string::npos) << s;
}

// A result below FLT_MIN is flushed to zero, as TensorFlow's CPU kernels compute (they run with
// FTZ/DAZ): here a linear SimpleRNN step of 1e-20 * 1e-20, on the calling thread and on the
// engine's other threads, and the caller's own floating-point mode is left as it was.
TEST(CpuEngine, SubnormalResultsAreFlushedToZeroAsInTensorFlow) {
  for (int hidden : {1, 64}) {  // one thread; the units split across threads
    SCOPED_TRACE(hidden);
    engine::RecurrentSpec spec;
    spec.cell = engine::CellType::kSimpleRnn;
    spec.input_size = 1;
    spec.hidden_size = hidden;
    spec.return_sequences = true;
    engine::RecurrentDirection dir;
    dir.f = engine::Activation::Of(engine::ActivationKind::kLinear);
    dir.W.assign(hidden, 1e-20f);
    dir.R.assign(static_cast<size_t>(hidden) * hidden, 0.0f);
    dir.bW.assign(hidden, 0.0f);
    dir.bR.assign(hidden, 0.0f);
    spec.directions.push_back(dir);
    engine::Model m;
    m.name = "subnormal";
    m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, 1}});
    m.layers.push_back({"rnn", "SimpleRNN", spec, {0}, {1}});
    m.outputs.push_back({"y", engine::DType::kFloat32, {}});
    m.output_values = {1};
    m.num_values = 2;
    auto compiled = Compile(m);
    ASSERT_NE(compiled, nullptr);
    engine::Batch batch;
    batch.inputs.push_back(Tensor::Float({2, 3, 1}, {1e-20f, 1e-20f, 1e-20f, 1.0f, 1.0f, 1.0f}));
    std::vector<Tensor> out;
    ASSERT_TRUE(compiled->Run(batch, &out).ok());
    ASSERT_EQ(out[0].num_elements(), 2 * 3 * hidden);
    for (int64_t i = 0; i < 3 * hidden; ++i) EXPECT_EQ(out[0].f32()[i], 0.0f) << i;  // 1e-40
    for (int64_t i = 3 * hidden; i < 6 * hidden; ++i) EXPECT_EQ(out[0].f32()[i], 1e-20f) << i;
    volatile float tiny = 1e-20f;
    EXPECT_GT(tiny * tiny, 0.0f) << "the caller's thread still computes subnormals";
  }
}

TEST(CpuEngine, UnsupportedLayerFailsAtCompileWithNameAndClass) {
  engine::Model m;
  m.name = "unsupported";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, 3}});
  m.layers.push_back(
      {"attn", "MultiHeadAttention", engine::UnsupportedSpec{"no kernel"}, {0}, {1}});
  m.outputs.push_back({"y", engine::DType::kFloat32, {}});
  m.output_values = {1};
  m.num_values = 2;
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(m, {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(compiled.status().message().find("'attn'"), std::string::npos);
  EXPECT_NE(compiled.status().message().find("MultiHeadAttention"), std::string::npos);
}

TEST(CpuEngine, LengthOutsideTimeAxisIsRejectedWithInputName) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TorchLstmModel(c));
  ASSERT_NE(compiled, nullptr);
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(c.at("x")));
  batch.lengths = {6, 6, 9, 1};
  std::vector<Tensor> out;
  const auto s = compiled->Run(batch, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("lengths[2] = 9: must be in [0, 6]"), std::string::npos) << s;
}

TEST(CpuEngine, MemoryBytesCoverPackedWeightsAndScratch) {
  const Case c = LoadCase("TorchLstm");
  auto compiled = Compile(TorchLstmModel(c));
  ASSERT_NE(compiled, nullptr);
  // Packed W [28, 5] and R [28, 7] at least, as panels of 32 columns.
  EXPECT_GE(compiled->memory_bytes(), static_cast<int64_t>(sizeof(float)) * 32 * (5 + 7));
}

}  // namespace
}  // namespace rnnserve
