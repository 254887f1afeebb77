// Where there is no GPU the CUDA engine says why, and AUTO instances run on the CPU engine.

#include "engine/engine.h"
#include "gtest/gtest.h"

namespace rnnserve::engine {
namespace {

TEST(CudaEngine, CreateSucceedsWhereAGpuIsVisible) {
  std::string why;
  if (!CudaAvailable(&why)) GTEST_SKIP() << "no GPU here: " << why;
  auto engine = Engine::Create({.kind = EngineKind::kCuda, .device = 0});
  ASSERT_TRUE(engine.ok() || engine.status().code() == absl::StatusCode::kUnimplemented)
      << engine.status();
}

TEST(CudaEngine, CreateWithoutGpuIsUnavailableWithReason) {
  std::string why;
  if (CudaAvailable(&why)) GTEST_SKIP() << "a GPU is visible";
  auto engine = Engine::Create({.kind = EngineKind::kCuda, .device = 0});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(engine.status().message().empty());
}

}  // namespace
}  // namespace rnnserve::engine
