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

}  // namespace
}  // namespace rnnserve
