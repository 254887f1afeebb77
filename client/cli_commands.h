#pragma once

// rnnserve-cli's commands. Each Add*Command adds its subcommand, with its flags and their help,
// to `app`; once argv is parsed, the parsed subcommand's `run` runs it and returns the process
// exit code.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "client/client.h"

namespace rnnserve::client {

struct Command {
  CLI::App* command;
  std::function<int()> run;
};

// A command whose flags are the connection's and --json; run gets them once parsed.
Command AddJsonCommand(CLI::App& app, const std::string& name, const std::string& description,
                       std::function<int(const ClientOptions&, bool json)> run);

Command AddEvaluateCommand(CLI::App& app);
Command AddStreamCommand(CLI::App& app);
// Generate (cli_generate.cc): streams a language model's text to the terminal as it is sampled.
Command AddGenerateCommand(CLI::App& app);
Command AddLoadCommand(CLI::App& app);
Command AddUnloadCommand(CLI::App& app);
Command AddServerCommand(CLI::App& app);
// grpc.health.v1 Check of --service ("": the whole server). Prints the status; exit code 0 when
// SERVING, 1 otherwise (NOT_SERVING, unknown service, no answer within --timeout-ms, default
// 5 s), so it serves as a container's HEALTHCHECK.
Command AddHealthCommand(CLI::App& app);

}  // namespace rnnserve::client
