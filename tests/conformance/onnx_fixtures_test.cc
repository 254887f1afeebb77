// ONNX models made by models/scripts/make_onnx_fixtures.py, run on the CPU engine:
//   node/<Case>   single LSTM/GRU/RNN nodes, one per option, vs onnxruntime's outputs;
//   ops/<Case>    the generic ops around recurrent layers, one per graph, vs onnxruntime;
//   torch/<Case>  torch.onnx.export of nn.LSTM/GRU/RNN with heads at opsets 14-20, vs
//                 PyTorch's float64 outputs, run at a batch and length other than the export's.
//   tf2onnx/<Case> Keras models with a custom layer (textgenrnn's AttentionWeightedAverage),
//                 converted by tf2onnx (models/scripts/make_tf2onnx_fixtures.py), vs Keras's
//                 float64 outputs: the route docs/import-keras.md gives for custom layers.
// Each case folder holds model.onnx and data.npz (in_<k>, out_<k>); the case name says the
// behaviour it pins.

#include <algorithm>
#include <filesystem>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Cases(const std::string& family) {
  std::vector<std::string> names;
  const fs::path dir = testing::SourcePath("tests/fixtures/onnx/" + family);
  if (!fs::is_directory(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Loads the case, runs its inputs, and compares every output.
void RunCase(const std::string& family, const std::string& name, double rtol, double atol) {
  const std::string dir = testing::SourcePath("tests/fixtures/onnx/" + family + "/" + name);
  auto model = models::LoadModelFile(dir + "/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  auto data = client::ReadNpz(dir + "/data.npz");
  ASSERT_TRUE(data.ok()) << data.status();
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  auto compiled = (*engine)->Compile(*model, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  engine::Batch batch;
  for (size_t k = 0; k < model->inputs.size(); ++k) {
    const auto it = data->find("in_" + std::to_string(k));
    ASSERT_NE(it, data->end()) << "in_" << k;
    batch.inputs.push_back(model->inputs[k].dtype == engine::DType::kInt64
                               ? testing::ToInt64Tensor(it->second)
                               : testing::ToFloatTensor(it->second));
  }
  std::vector<engine::Tensor> out;
  const absl::Status run = (*compiled)->Run(batch, &out);
  ASSERT_TRUE(run.ok()) << run;
  ASSERT_EQ(out.size(), model->outputs.size());
  for (size_t k = 0; k < out.size(); ++k) {
    const auto it = data->find("out_" + std::to_string(k));
    ASSERT_NE(it, data->end()) << "out_" << k;
    EXPECT_TRUE(testing::AllClose(out[k], it->second, rtol, atol))
        << "output " << model->outputs[k].name;
  }
}

class OnnxNodeTest : public ::testing::TestWithParam<std::string> {};
class OnnxOpTest : public ::testing::TestWithParam<std::string> {};
class TorchExportTest : public ::testing::TestWithParam<std::string> {};
class Tf2OnnxTest : public ::testing::TestWithParam<std::string> {};

// onnxruntime computes in FP32 too; its result and ours differ by rounding order only.
TEST_P(OnnxNodeTest, MatchesReference) { RunCase("node", GetParam(), 1e-5, 1e-6); }

TEST_P(OnnxOpTest, MatchesReference) { RunCase("ops", GetParam(), 1e-5, 1e-6); }

// PyTorch's reference is float64; ours is FP32 through several layers.
TEST_P(TorchExportTest, MatchesReference) { RunCase("torch", GetParam(), 1e-5, 1e-6); }

// Keras's reference is float64; ours is FP32 through the traced custom layer's ops.
TEST_P(Tf2OnnxTest, MatchesKeras) { RunCase("tf2onnx", GetParam(), 1e-5, 1e-6); }

auto CaseName = [](const ::testing::TestParamInfo<std::string>& info) { return info.param; };

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxNodeTest, ::testing::ValuesIn(Cases("node")), CaseName);
INSTANTIATE_TEST_SUITE_P(Onnx, OnnxOpTest, ::testing::ValuesIn(Cases("ops")), CaseName);
INSTANTIATE_TEST_SUITE_P(Onnx, TorchExportTest, ::testing::ValuesIn(Cases("torch")), CaseName);
INSTANTIATE_TEST_SUITE_P(Onnx, Tf2OnnxTest, ::testing::ValuesIn(Cases("tf2onnx")), CaseName);

TEST(OnnxFixtures, EveryFamilyHasItsCases) {
  EXPECT_GE(Cases("node").size(), 30u);
  EXPECT_GE(Cases("ops").size(), 40u);
  EXPECT_GE(Cases("torch").size(), 9u);
  EXPECT_GE(Cases("tf2onnx").size(), 1u);
}

}  // namespace
}  // namespace rnnserve
