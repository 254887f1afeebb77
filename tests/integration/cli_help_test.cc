// Every binary's command line, as CLI11 parses it: `--help` (of each binary, mode and rnnserve-cli
// command) lists every flag, and an unknown flag exits 2 with a message naming it.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/server_process.h"

namespace rnnserve::testing {
namespace {

struct CommandLine {
  std::vector<std::string> argv;      // the binary and its mode or command
  std::vector<std::string> required;  // arguments it needs besides flags under test
  std::vector<std::string> listed;    // what --help must list: every flag, mode or command
};

std::vector<CommandLine> CommandLines() {
  const std::vector<std::string> connection = {"--server",    "--address",  "--timeout-ms",
                                               "--tls-ca",    "--tls-cert", "--tls-key",
                                               "--token-file"};
  auto with_connection = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), connection.begin(), connection.end());
    return flags;
  };
  std::vector<CommandLine> out = {
      {{RNNSERVE_BIN},
       {},
       {"--model-repository",
        "--address",
        "--metrics-address",
        "--host",
        "--tls-cert",
        "--tls-key",
        "--tls-client-ca",
        "--auth-token-file",
        "--admin-token-file",
        "--no-reflection",
        "--port",
        "--metrics-port",
        "--http-port",
        "--http-max-connections",
        "--http-read-timeout-seconds",
        "--log-level",
        "--max-message-bytes",
        "--repository-poll-seconds",
        "--grpc-min-pollers",
        "--grpc-max-pollers",
        "--model-check-seconds",
        "--drain-seconds",
        "--max-inflight-bytes",
        "--max-concurrent-per-model",
        "--max-streams",
        "--max-generations",
        "--stream-idle-seconds",
        "--grpc-max-threads",
        "--max-sequences-per-client",
        "--fair-floor-percent",
        "--strict-readiness",
        "rnnserve inspect FILE"}},
      {{RNNSERVE_BIN, "--check-model"}, {"model.h5"}, {"FILE", "--format", "--architecture"}},
      {{RNNSERVE_BIN, "inspect"}, {"model.h5"}, {"FILE", "--architecture", "--json"}},
      {{RNNSERVE_CLI_BIN},
       {},
       {"predict", "list", "metadata", "evaluate", "stream", "generate", "load", "unload", "server",
        "health"}},
      {{RNNSERVE_CLI_BIN, "predict"},
       {"--model", "m", "--input", "x.npy"},
       with_connection({"--model", "--input", "--lengths", "--version", "--output", "--json"})},
      {{RNNSERVE_CLI_BIN, "list"}, {}, with_connection({"--json"})},
      {{RNNSERVE_CLI_BIN, "metadata"},
       {"--model", "m"},
       with_connection({"--model", "--version", "--json"})},
      {{RNNSERVE_CLI_BIN, "evaluate"},
       {"--model", "m", "--input", "x.npy", "--target", "y.npy"},
       with_connection({"--model", "--input", "--target", "--sample-weight", "--loss", "--metrics",
                        "--batch-size", "--lengths", "--json"})},
      {{RNNSERVE_CLI_BIN, "stream"},
       {"--model", "m", "--input", "x.npy", "--chunk-steps", "4"},
       with_connection({"--model", "--input", "--chunk-steps", "--sequence-id", "--lengths",
                        "--output", "--verbose", "--json"})},
      {{RNNSERVE_CLI_BIN, "generate"},
       {"--model", "m"},
       with_connection({"--model", "--version", "--prompt", "--prompt-ids", "--max-tokens",
                        "--temperature", "--top-k", "--top-p", "--seed", "--stop", "--n", "--ids",
                        "--json"})},
      {{RNNSERVE_CLI_BIN, "load"}, {"--model", "m"}, with_connection({"--model"})},
      {{RNNSERVE_CLI_BIN, "unload"}, {"--model", "m"}, with_connection({"--model"})},
      {{RNNSERVE_CLI_BIN, "server"}, {}, with_connection({"--json"})},
      {{RNNSERVE_CLI_BIN, "health"}, {}, with_connection({"--service"})},
  };
#ifdef CPU_RNN_BENCH_BIN
  out.push_back({{CPU_RNN_BENCH_BIN},
                 {"--gemm"},
                 {"--case", "--cell", "--reps", "--threads", "--bandwidth", "--gemm"}});
#endif
#ifdef GPU_PEERS_BIN
  out.push_back({{GPU_PEERS_BIN}, {"/dev/null", "results.txt"}, {"MANIFEST", "RESULTS"}});
#endif
  return out;
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

TEST(CliHelpTest, HelpListsEveryFlag) {
  for (const CommandLine& c : CommandLines()) {
    std::vector<std::string> argv = c.argv;
    argv.push_back("--help");
    std::string log;
    EXPECT_EQ(RunCommand(argv, &log), 0) << Joined(argv) << ":\n" << log;
    for (const std::string& flag : c.listed) {
      EXPECT_NE(log.find(flag), std::string::npos)
          << Joined(argv) << " does not list " << flag << ":\n"
          << log;
    }
  }
}

TEST(CliHelpTest, UnknownFlagExitsTwoNamingIt) {
  for (const CommandLine& c : CommandLines()) {
    std::vector<std::string> argv = c.argv;
    argv.insert(argv.end(), c.required.begin(), c.required.end());
    argv.push_back("--no-such-flag");
    std::string log;
    EXPECT_EQ(RunCommand(argv, &log), 2) << Joined(argv) << ":\n" << log;
    EXPECT_NE(log.find("--no-such-flag"), std::string::npos) << Joined(argv) << ":\n" << log;
  }
}

TEST(CliHelpTest, BadValueExitsTwoNamingTheFlagAndValue) {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {RNNSERVE_BIN, "--grpc-max-pollers", "4097"},
           {RNNSERVE_BIN, "--log-level", "loud"},
           {RNNSERVE_CLI_BIN, "stream", "--model", "m", "--input", "x.npy", "--chunk-steps", "0"},
           {RNNSERVE_CLI_BIN, "predict", "--model", "m", "--input", "x.npy", "--lengths", "4,x"}}) {
    std::string log;
    EXPECT_EQ(RunCommand(argv, &log), 2) << Joined(argv) << ":\n" << log;
    EXPECT_NE(log.find(argv[argv.size() - 2]), std::string::npos) << log;
    EXPECT_NE(log.find(argv.back()), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace rnnserve::testing
