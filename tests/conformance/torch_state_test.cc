// PyTorch's initial states through the ONNX importer and the CPU engine, against PyTorch
// (tests/fixtures/torch_state/, models/scripts/make_torch_state_fixtures.py):
//   - h0 / c0 graph inputs [num_layers * num_directions, batch, hidden] in both layouts,
//     stacked and bidirectional, LSTM and GRU, at batch sizes 1, 2 and 4: the importer traces
//     their batch axis (1) and that of h_n / c_n, and the outputs are PyTorch's;
//   - the exporter's zero initial state (Shape -> Gather -> ... -> ConstantOfShape) is imported
//     as no initial state, so chunks run one after another with the state carried between them
//     give PyTorch's outputs on the whole sequence.

#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

using client::NpyArray;

std::string Dir(const std::string& name) {
  return testing::SourcePath("tests/fixtures/torch_state/" + name);
}

std::map<std::string, NpyArray> Data(const std::string& name) {
  auto data = client::ReadNpz(Dir(name) + "/data.npz");
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *data : std::map<std::string, NpyArray>{};
}

std::unique_ptr<engine::CompiledModel> Compile(const engine::Model& model) {
  auto engine = engine::Engine::Create({});
  EXPECT_TRUE(engine.ok());
  if (!engine.ok()) return nullptr;
  auto compiled = (*engine)->Compile(model, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

class TorchInitialStateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchInitialStateTest, StateInputsAndOutputsHoldTheBatchOnAxis1) {
  auto model = models::LoadModelFile(Dir(GetParam()) + "/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  const bool time_major = GetParam().find("TimeMajor") != std::string::npos;
  ASSERT_GE(model->inputs.size(), 2u);
  EXPECT_EQ(model->inputs[0].name, "x");
  EXPECT_EQ(model->inputs[0].batch_axis, time_major ? 1 : 0);
  for (size_t k = 1; k < model->inputs.size(); ++k) {
    EXPECT_EQ(model->inputs[k].batch_axis, 1) << model->inputs[k].name;
  }
  for (size_t k = 1; k < model->outputs.size(); ++k) {
    EXPECT_EQ(model->outputs[k].batch_axis, 1) << model->outputs[k].name;
  }
}

TEST_P(TorchInitialStateTest, MatchesPyTorchAtBatchSizes1To4) {
  auto model = models::LoadModelFile(Dir(GetParam()) + "/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  auto compiled = Compile(*model);
  ASSERT_NE(compiled, nullptr);
  const auto data = Data(GetParam());
  for (int b : {1, 2, 4}) {
    engine::Batch batch;
    for (size_t k = 0; k < model->inputs.size(); ++k) {
      const auto it = data.find("in_" + std::to_string(k) + "_b" + std::to_string(b));
      ASSERT_NE(it, data.end()) << k << " " << b;
      batch.inputs.push_back(testing::ToFloatTensor(it->second));
    }
    std::vector<engine::Tensor> out;
    const absl::Status run = compiled->Run(batch, &out);
    ASSERT_TRUE(run.ok()) << "B=" << b << ": " << run;
    ASSERT_EQ(out.size(), model->outputs.size());
    for (size_t k = 0; k < out.size(); ++k) {
      EXPECT_TRUE(testing::AllClose(
          out[k], data.at("out_" + std::to_string(k) + "_b" + std::to_string(b)), 1e-5, 1e-6))
          << model->outputs[k].name << " at B=" << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TorchState, TorchInitialStateTest,
                         ::testing::Values("TorchLstmDocsRecipeH0C0",
                                           "TorchLstmTimeMajorStackedBidirectionalH0C0",
                                           "TorchLstmBatchFirstStackedBidirectionalH0C0",
                                           "TorchGruBatchFirstStackedH0",
                                           "TorchGruTimeMajorBidirectionalH0"));

class TorchZeroStateTest : public ::testing::TestWithParam<std::string> {};

// Steps [t0, t1) of a [B, T, F] array.
engine::Tensor Steps(const NpyArray& x, int64_t t0, int64_t t1) {
  const int64_t B = x.shape[0], T = x.shape[1], F = x.shape[2];
  std::vector<float> v;
  for (int64_t b = 0; b < B; ++b) {
    v.insert(v.end(), x.values.begin() + (b * T + t0) * F, x.values.begin() + (b * T + t1) * F);
  }
  return engine::Tensor::Float({B, t1 - t0, F}, std::move(v));
}

TEST_P(TorchZeroStateTest, ZeroStateChainIsNoInitialState) {
  auto model = models::LoadModelFile(Dir(GetParam()) + "/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  int recurrent = 0;
  for (const engine::Layer& layer : model->layers) {
    EXPECT_NE(layer.source_class, "onnx::Shape") << layer.name;
    EXPECT_NE(layer.source_class, "onnx::ConstantOfShape") << layer.name;
    if (!std::holds_alternative<engine::RecurrentSpec>(layer.spec)) continue;
    ++recurrent;
    EXPECT_EQ(layer.inputs.size(), 1u) << layer.name << " reads an initial state";
  }
  EXPECT_GE(recurrent, 1);
}

TEST_P(TorchZeroStateTest, ChunksWithCarriedStateEqualPyTorchOnTheWholeSequence) {
  auto model = models::LoadModelFile(Dir(GetParam()) + "/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  auto compiled = Compile(*model);
  ASSERT_NE(compiled, nullptr);
  const auto data = Data(GetParam());
  const NpyArray& x = data.at("in_0");
  const NpyArray& want = data.at("out_0");  // [B, T, 3]
  const int64_t B = x.shape[0], T = x.shape[1], C = want.shape[2];
  std::map<std::string, std::vector<engine::Tensor>> states;
  int64_t t0 = 0;
  for (int64_t size : {5, 4, 3}) {
    const int64_t t1 = std::min(T, t0 + size);
    engine::Batch chunk;
    chunk.inputs.push_back(Steps(x, t0, t1));
    chunk.continues = t0 > 0;
    chunk.initial_states = states;
    std::map<std::string, std::vector<engine::Tensor>> final_states;
    chunk.final_states = &final_states;
    std::vector<engine::Tensor> out;
    const absl::Status run = compiled->Run(chunk, &out);
    ASSERT_TRUE(run.ok()) << "steps " << t0 << ".." << t1 << ": " << run;
    ASSERT_EQ(out.size(), 1u);
    NpyArray part{.shape = {B, t1 - t0, C}};
    for (int64_t b = 0; b < B; ++b) {
      part.values.insert(part.values.end(), want.values.begin() + (b * T + t0) * C,
                         want.values.begin() + (b * T + t1) * C);
    }
    EXPECT_TRUE(testing::AllClose(out[0], part, 1e-5, 1e-6)) << "steps " << t0 << ".." << t1;
    states = std::move(final_states);
    t0 = t1;
  }
  EXPECT_EQ(t0, T);
}

INSTANTIATE_TEST_SUITE_P(TorchState, TorchZeroStateTest,
                         ::testing::Values("TorchLstmCausalLinearZeroState",
                                           "TorchLstmStackedCausalLinearZeroState",
                                           "TorchGruCausalLinearZeroState"));

}  // namespace
}  // namespace rnnserve
