// Logs that a client cannot flood (server/log.h): repeats are spaced out with a count, gRPC's
// own lines (failed handshakes) come through at WARNING, and a run failure is an ERROR only when
// the server is at fault.

#include "server/log.h"

#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_split.h"

namespace rnnserve::server {
namespace {

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.find(needle) != absl::string_view::npos) ++n;
  }
  return n;
}

TEST(RepeatLimiterTest, RepeatsAreSpacedOutDoublingAndCountedAndANewMessageStartsOver) {
  RepeatLimiter limiter(absl::Seconds(10), absl::Seconds(40));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t held = -1;
  EXPECT_TRUE(limiter.Allow("k", "m", &held, t0));
  EXPECT_EQ(held, 0);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(limiter.Allow("k", "m", &held, t0 + absl::Seconds(i)));
  EXPECT_TRUE(limiter.Allow("k", "m", &held, t0 + absl::Seconds(10)));
  EXPECT_EQ(held, 5);
  EXPECT_FALSE(limiter.Allow("k", "m", &held, t0 + absl::Seconds(29)));  // next after 20 s
  EXPECT_TRUE(limiter.Allow("k", "m", &held, t0 + absl::Seconds(30)));
  EXPECT_EQ(held, 1);
  EXPECT_TRUE(limiter.Allow("k", "other", &held, t0 + absl::Seconds(31)));
  EXPECT_TRUE(limiter.Allow("j", "m", &held, t0 + absl::Seconds(31)));
  EXPECT_EQ(HeldBackSuffix(3), " (3 similar lines held back)");
  EXPECT_EQ(HeldBackSuffix(0), "");
}

TEST(RepeatLimiterTest, KeysAreBounded) {
  RepeatLimiter limiter(absl::Seconds(10), absl::Seconds(40), /*max_keys=*/4);
  int64_t held = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(limiter.Allow(std::to_string(i), "m", &held));
  }
}

TEST(LogFloodTest, GrpcErrorsFromPeersComeThroughOnceAtWarning) {
  RouteGrpcLog();
  grpc_init();  // gRPC logs nothing before it is initialised (a server initialises it)
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 300; ++i) {
    gpr_log(GPR_ERROR, "Handshake failed with fatal error SSL_ERROR_SSL from peer %d", i);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  grpc_shutdown();
  EXPECT_EQ(CountLines(out, "Handshake failed"), 1) << out;
  EXPECT_EQ(CountLines(out, " WARNING "), 1) << out;
  EXPECT_EQ(CountLines(out, " ERROR "), 0) << out;
}

TEST(LogFloodTest, RunFailuresAreErrorsOnlyWhenTheServerIsAtFaultAndRepeatsAreHeldBack) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 100; ++i) {
    LogRunFailure("m", 1, absl::InvalidArgumentError("input 'x': expected [?,?,2]"));
  }
  for (int i = 0; i < 100; ++i) LogRunFailure("m", 1, absl::InternalError("engine fault"));
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountLines(out, "expected [?,?,2]"), 0) << out;  // DEBUG: below the default level
  EXPECT_EQ(CountLines(out, "engine fault"), 1) << out;
  EXPECT_EQ(CountLines(out, " ERROR "), 1) << out;
}

}  // namespace
}  // namespace rnnserve::server
