#include "server/flags.h"

#include <map>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server {

std::string ServerUsage() {
  return "usage: rnnserve [--model-repository DIR] [--host ADDR] [--port N] [--metrics-port N]\n"
         "                [--log-level debug|info|warning|error] [--max-message-bytes N]\n"
         "  --model-repository  models to serve: DIR/<model>/[config.pbtxt] and\n"
         "                      DIR/<model>/<version>/<file> (default models/examples)\n"
         "  --host              address to listen on (default 127.0.0.1)\n"
         "  --port              gRPC port (default 8500)\n"
         "  --metrics-port      Prometheus /metrics port (default 8502, 0: off)\n"
         "  --log-level         default info\n"
         "  --max-message-bytes largest request or response (default 64 MiB)\n"
         "  --repository-poll-seconds  rescan the repository every N s and load what changed\n"
         "                      (default 0: load once at start; LoadModel/UnloadModel always "
         "work)\n"
         "  --grpc-min-pollers  gRPC server threads kept waiting for calls (default 4)\n"
         "  --grpc-max-pollers  most gRPC server threads waiting for calls at once; a thread\n"
         "                      beyond it exits after its call (default 64, >= min)\n"
         "  --model-check-seconds  parse each model file first in a child process that may\n"
         "                      take this long; a file that makes the parser hang or crash\n"
         "                      fails its own load only (default 120, 0: off)\n";
}

absl::StatusOr<ServerFlags> ParseServerFlags(int argc, char** argv, bool* help) {
  ServerFlags flags;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return flags;
    }
    if (arg.substr(0, 2) != "--") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = std::string(arg.substr(2, eq - 2));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = std::string(arg.substr(2));
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    auto port = [&](int* out) -> absl::Status {
      if (!absl::SimpleAtoi(value, out) || *out < 0 || *out > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be a port in [0, 65535]; was '", value, "'"));
      }
      return absl::OkStatus();
    };
    absl::Status s;
    if (name == "model-repository") {
      flags.model_repository = value;
    } else if (name == "host") {
      flags.host = value;
    } else if (name == "port") {
      s = port(&flags.port);
    } else if (name == "metrics-port") {
      s = port(&flags.metrics_port);
    } else if (name == "log-level") {
      flags.log_level = value;
    } else if (name == "max-message-bytes") {
      if (!absl::SimpleAtoi(value, &flags.max_message_bytes) || flags.max_message_bytes <= 0 ||
          flags.max_message_bytes > (int64_t{1} << 31) - 1) {
        s = absl::InvalidArgumentError(
            absl::StrCat("--max-message-bytes must be in [1, 2^31); was '", value, "'"));
      }
    } else if (name == "repository-poll-seconds") {
      if (!absl::SimpleAtoi(value, &flags.repository_poll_seconds) ||
          flags.repository_poll_seconds < 0) {
        s = absl::InvalidArgumentError(absl::StrCat(
            "--repository-poll-seconds must be a non-negative integer; was '", value, "'"));
      }
    } else if (name == "model-check-seconds") {
      if (!absl::SimpleAtoi(value, &flags.model_check_seconds) || flags.model_check_seconds < 0) {
        s = absl::InvalidArgumentError(absl::StrCat(
            "--model-check-seconds must be a non-negative integer; was '", value, "'"));
      }
    } else if (name == "grpc-min-pollers" || name == "grpc-max-pollers") {
      int* out = name == "grpc-min-pollers" ? &flags.grpc_min_pollers : &flags.grpc_max_pollers;
      if (!absl::SimpleAtoi(value, out) || *out < 1 || *out > 4096) {
        s = absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be an integer in [1, 4096]; was '", value, "'"));
      }
    } else {
      s = absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!s.ok()) return s;
  }
  if (flags.grpc_min_pollers > flags.grpc_max_pollers) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-min-pollers (", flags.grpc_min_pollers,
                                                   ") must not exceed --grpc-max-pollers (",
                                                   flags.grpc_max_pollers, ")"));
  }
  return flags;
}

}  // namespace rnnserve::server
