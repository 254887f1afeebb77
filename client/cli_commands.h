#pragma once

// rnnserve-cli commands beyond predict/list/metadata. Each returns the process exit code.

#include "client/cli_common.h"
#include "client/client.h"

namespace rnnserve::client {

int EvaluateCommand(const Args& args, RnnServeClient& client);
int StreamCommand(const Args& args, RnnServeClient& client);
int LoadCommand(const Args& args, RnnServeClient& client);
int UnloadCommand(const Args& args, RnnServeClient& client);
int ServerCommand(const Args& args, RnnServeClient& client);
// grpc.health.v1 Check of --service ("" : the whole server) on options.server. Prints the
// status; exit code 0 when SERVING, 1 otherwise (NOT_SERVING, unknown service, no answer), so
// it serves as a container's HEALTHCHECK.
int HealthCommand(const Args& args, const ClientOptions& options);
// Reads a model file locally (no server) and prints the architecture rnnserve would run.
int InspectCommand(const Args& args);

}  // namespace rnnserve::client
