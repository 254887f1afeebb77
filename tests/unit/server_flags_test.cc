// server/flags.h: the rnnserve binary's command line.

#include "server/flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rnnserve::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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
    EXPECT_THAT(flags.status().message(), AllOf(HasSubstr("--grpc-max-pollers"), HasSubstr(bad)));
  }
}

TEST(ServerFlagsTest, PortsOutsideZeroTo65535AreRejected) {
  for (const char* flag : {"--port", "--metrics-port"}) {
    for (const char* bad : {"-1", "65536", "http"}) {
      auto flags = Parse({flag, bad});
      ASSERT_FALSE(flags.ok()) << flag << " " << bad;
      EXPECT_THAT(flags.status().message(), AllOf(HasSubstr(flag), HasSubstr(bad)));
    }
  }
  auto flags = Parse({"--port=0", "--metrics-port", "65535"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->port, 0);
  EXPECT_EQ(flags->metrics_port, 65535);
}

TEST(ServerFlagsTest, DefaultsAreKept) {
  auto flags = Parse({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->model_repository, "models/examples");
  EXPECT_EQ(flags->address, "127.0.0.1");  // loopback unless told
  EXPECT_EQ(flags->metrics_address, "127.0.0.1");
  EXPECT_TRUE(flags->reflection);
  EXPECT_EQ(flags->tls_cert, "");
  EXPECT_EQ(flags->auth_token_file, "");
  EXPECT_EQ(flags->port, 8500);
  EXPECT_EQ(flags->metrics_port, 8502);
  EXPECT_EQ(flags->log_level, "info");
  EXPECT_EQ(flags->max_message_bytes, 64 << 20);
  EXPECT_EQ(flags->repository_poll_seconds, 0);
}

TEST(ServerFlagsTest, StrictReadinessIsOnByDefaultAndTurnsOffInEveryForm) {
  auto defaults = Parse({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->strict_readiness);
  for (const char* off : {"--strict-readiness=false", "--no-strict-readiness"}) {
    auto flags = Parse({off});
    ASSERT_TRUE(flags.ok()) << off << ": " << flags.status();
    EXPECT_FALSE(flags->strict_readiness) << off;
  }
  auto on = Parse({"--strict-readiness=false", "--strict-readiness"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->strict_readiness);
  auto bad = Parse({"--strict-readiness=maybe"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("strict-readiness"));
}

TEST(ServerFlagsTest, CompletionThreadsDefaultToTheCoresShareAndTakeACount) {
  auto defaults = Parse({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->completion_threads, 0);  // main: three quarters of the cores, 2 to 16
  auto twelve = Parse({"--completion-threads=12"});
  ASSERT_TRUE(twelve.ok()) << twelve.status();
  EXPECT_EQ(twelve->completion_threads, 12);
  auto negative = Parse({"--completion-threads", "-1"});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("completion-threads"), std::string::npos)
      << negative.status();
}

TEST(ServerFlagsTest, AddressesAreApartAndHostSetsBoth) {
  auto apart = Parse({"--address=0.0.0.0", "--metrics-address", "10.0.0.5"});
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ(apart->address, "0.0.0.0");
  EXPECT_EQ(apart->metrics_address, "10.0.0.5");
  auto both = Parse({"--host", "0.0.0.0"});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->address, "0.0.0.0");
  EXPECT_EQ(both->metrics_address, "0.0.0.0");
}

TEST(ServerFlagsTest, SecurityFlagsAreTaken) {
  auto flags =
      Parse({"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem",
             "--auth-token-file", "t.txt", "--admin-token-file", "a.txt", "--no-reflection"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->tls_cert, "c.pem");
  EXPECT_EQ(flags->tls_key, "k.pem");
  EXPECT_EQ(flags->tls_client_ca, "ca.pem");
  EXPECT_EQ(flags->auth_token_file, "t.txt");
  EXPECT_EQ(flags->admin_token_file, "a.txt");
  EXPECT_FALSE(flags->reflection);
}

TEST(ServerFlagsTest, MaxMessageBytesMustFitAnInt) {
  EXPECT_FALSE(Parse({"--max-message-bytes=0"}).ok());
  EXPECT_FALSE(Parse({"--max-message-bytes=2147483648"}).ok());
  auto flags = Parse({"--max-message-bytes=2147483647"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->max_message_bytes, 2147483647);
}

TEST(ServerFlagsTest, HelpIsReportedAndListsEveryFlag) {
  std::vector<std::string> args = {"rnnserve", "--help"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false;
  ASSERT_TRUE(ParseServerFlags(2, argv.data(), &help).ok());
  EXPECT_TRUE(help);
  for (const char* flag :
       {"--model-repository", "--address", "--metrics-address", "--host", "--tls-cert", "--tls-key",
        "--tls-client-ca", "--auth-token-file", "--admin-token-file", "--no-reflection", "--port",
        "--metrics-port", "--log-level", "--max-message-bytes", "--repository-poll-seconds",
        "--grpc-min-pollers", "--grpc-max-pollers", "--model-check-seconds"}) {
    EXPECT_THAT(ServerUsage(), HasSubstr(flag));
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
  EXPECT_EQ(flags->model_check_seconds, 30);
  flags = Parse({"--model-check-seconds=0"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->model_check_seconds, 0);
  flags = Parse({"--model-check-seconds", "-3"});
  ASSERT_FALSE(flags.ok());
  EXPECT_THAT(flags.status().message(), AllOf(HasSubstr("--model-check-seconds"), HasSubstr("-3")));
}

TEST(ServerFlagsTest, AFlagGivenTwiceTakesItsLastValue) {
  auto flags = Parse({"--metrics-port", "0", "--port=9000", "--metrics-port=9100"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->port, 9000);
  EXPECT_EQ(flags->metrics_port, 9100);
}

TEST(ServerFlagsTest, UnknownFlagIsNamed) {
  auto flags = Parse({"--grpc-pollers=3"});
  ASSERT_FALSE(flags.ok());
  EXPECT_THAT(flags.status().message(), HasSubstr("--grpc-pollers"));
}

TEST(ServerFlagsTest, ResourceLimitsHaveTheirDocumentedDefaults) {
  auto flags = Parse({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->max_inflight_bytes, int64_t{1} << 30);
  EXPECT_EQ(flags->max_concurrent_per_model, 0);
  EXPECT_EQ(flags->max_streams, 256);
  EXPECT_EQ(flags->stream_idle_seconds, 300);
  EXPECT_EQ(flags->grpc_max_threads, 512);
  EXPECT_EQ(flags->max_sequences_per_client, 128);
  EXPECT_EQ(flags->grpc_memory_bytes, 0);
}

TEST(ServerFlagsTest, GrpcMemoryBytesIsTakenAndMustNotBeNegative) {
  auto flags = Parse({"--grpc-memory-bytes=67108864"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->grpc_memory_bytes, int64_t{64} << 20);
  auto bad = Parse({"--grpc-memory-bytes=-1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--grpc-memory-bytes"));
}

TEST(ServerFlagsTest, GrpcMaxThreadsMustExceedMaxStreams) {
  auto flags = Parse({"--max-streams=64", "--grpc-max-threads=64"});
  ASSERT_FALSE(flags.ok());
  EXPECT_THAT(flags.status().message(),
              AllOf(HasSubstr("--grpc-max-threads (64)"), HasSubstr("--max-streams (64)")));
  EXPECT_TRUE(Parse({"--max-streams=64", "--grpc-max-threads=65"}).ok());
}

TEST(ServerFlagsTest, ResourceLimitsRejectNonPositiveValues) {
  for (const char* bad :
       {"--max-inflight-bytes=0", "--max-streams=0", "--max-sequences-per-client=0",
        "--max-concurrent-per-model=-1", "--stream-idle-seconds=-1"}) {
    EXPECT_FALSE(Parse({bad}).ok()) << bad;
  }
}

}  // namespace
}  // namespace rnnserve::server
