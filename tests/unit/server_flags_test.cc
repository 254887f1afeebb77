// server/flags.h: the rnnserve binary's command line.

#include "server/flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::server {
namespace {

absl::StatusOr<ServerFlags> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "rnnserve");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false;
  return ParseServerFlags(static_cast<int>(argv.size()), argv.data(), &help);
}

TEST(ServerFlagsTest, GrpcPollersDefaultToFourAndSixtyFour) {
  auto flags = Parse({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->grpc_min_pollers, 4);
  EXPECT_EQ(flags->grpc_max_pollers, 64);
}

TEST(ServerFlagsTest, GrpcPollersAreParsedInBothForms) {
  auto flags = Parse({"--grpc-min-pollers=2", "--grpc-max-pollers", "8"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->grpc_min_pollers, 2);
  EXPECT_EQ(flags->grpc_max_pollers, 8);
}

TEST(ServerFlagsTest, GrpcPollersOutOfRangeNameTheFlagAndValue) {
  for (const char* bad : {"0", "-1", "4097", "many"}) {
    auto flags = Parse({"--grpc-max-pollers", bad});
    ASSERT_FALSE(flags.ok()) << bad;
    EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(flags.status().message(),
              std::string("--grpc-max-pollers must be an integer in [1, 4096]; was '") + bad + "'");
  }
}

TEST(ServerFlagsTest, GrpcMinPollersAboveMaxIsRejected) {
  auto flags = Parse({"--grpc-min-pollers=16", "--grpc-max-pollers=8"});
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(),
            "--grpc-min-pollers (16) must not exceed --grpc-max-pollers (8)");
}

TEST(ServerFlagsTest, ModelCheckSecondsDefaultsTo120AndTakesZero) {
  auto flags = Parse({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->model_check_seconds, 120);
  flags = Parse({"--model-check-seconds=0"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->model_check_seconds, 0);
  flags = Parse({"--model-check-seconds", "-3"});
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(),
            "--model-check-seconds must be a non-negative integer; was '-3'");
}

TEST(ServerFlagsTest, UnknownFlagIsNamed) {
  auto flags = Parse({"--grpc-pollers=3"});
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(), "unknown flag --grpc-pollers");
}

}  // namespace
}  // namespace rnnserve::server
