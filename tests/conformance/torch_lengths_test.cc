// Per-sequence lengths on PyTorch exports without sequence_lens (tests/fixtures/torch_lengths,
// made by models/scripts/make_torch_lengths_fixtures.py), through the real ONNX importer on the
// CPU engine: each row's answer equals PyTorch's on that row's truncated sequence (last-step
// heads, per-step outputs zero past the length, h_n / c_n at the length, length 0), and a model
// that mixes time steps refuses lengths naming the layer. The GPU half is
// tests/gpu/gpu_torch_lengths_test.cc.

#include "tests/support/torch_lengths.h"
#include "engine/engine.h"
#include "engine/lengths_rewrite.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

class TorchLengthsTest : public ::testing::TestWithParam<std::string> {};

// PyTorch's reference is float64; ours is FP32.
TEST_P(TorchLengthsTest, MatchesPyTorchOnTruncatedRows) {
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  EXPECT_TRUE(testing::TorchLengthsCaseMatches(**engine, GetParam(), 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchLengthsTest, ::testing::ValuesIn(testing::TorchLengthsCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(TorchLengths, EveryCaseIsThere) { EXPECT_GE(testing::TorchLengthsCases().size(), 12u); }

// Known at load, for the server to refuse at the edge and say in the metadata.
TEST(TorchLengths, RefusalIsKnownAtLoad) {
  auto model = models::LoadModelFile(
      testing::SourcePath("tests/fixtures/torch_lengths/CenteredOverTimeRefused/model.onnx"));
  ASSERT_TRUE(model.ok()) << model.status();
  const engine::LengthsRewrite rw = engine::RewriteForLengths(*model);
  EXPECT_EQ(rw.honored.code(), absl::StatusCode::kInvalidArgument) << rw.honored;
  EXPECT_NE(rw.honored.message().find("ReduceMean"), std::string::npos) << rw.honored;
  auto ok = models::LoadModelFile(
      testing::SourcePath("tests/fixtures/torch_lengths/LstmLastStepLinear/model.onnx"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(engine::RewriteForLengths(*ok).honored.ok());
}

// Keras files honour lengths through their masks; one that convolves over time before its
// recurrent layer cannot (a padded step would leak into real ones), and now says so instead of
// answering for the padded sequence.
TEST(TorchLengths, KerasConvolutionOverTimeRefusesLengths) {
  const std::string dir = "tests/fixtures/keras/Keras2Conv1DPooling/";
  auto model = models::LoadModelFile(testing::SourcePath(dir + "model.h5"));
  ASSERT_TRUE(model.ok()) << model.status();
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  auto compiled = (*engine)->Compile(*model, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  engine::Batch batch;
  batch.inputs.push_back(testing::ToFloatTensor(testing::LoadNpy(dir + "input_0.npy")));
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
  batch.lengths.assign(batch.inputs[0].dim(0), 5);
  const absl::Status s = (*compiled)->Run(batch, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("(Conv1D) convolves or pools over the time axis"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace rnnserve
