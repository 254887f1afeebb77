// Per-sequence lengths on PyTorch exports without sequence_lens (tests/fixtures/torch_lengths,
// models/scripts/make_torch_lengths_fixtures.py) on the GPU engine: the same answers as the CPU
// engine gives in tests/conformance/torch_lengths_test.cc, PyTorch's on each truncated row, and
// the same refusals. Each batch runs three times (eager, captured, replayed).

#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/torch_lengths.h"

namespace rnnserve::testing {
namespace {

class GpuTorchLengthsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuTorchLengthsTest, MatchesPyTorchOnTruncatedRows) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  auto engine = engine::Engine::Create({.kind = engine::EngineKind::kCuda});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(TorchLengthsCaseMatches(**engine, GetParam(), 1e-4, 1e-5, /*runs=*/3));
}

INSTANTIATE_TEST_SUITE_P(Torch, GpuTorchLengthsTest, ::testing::ValuesIn(TorchLengthsCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace rnnserve::testing
