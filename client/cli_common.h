#pragma once

// Pieces shared by rnnserve-cli's commands: argument parsing, input files, output formatting.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/npy.h"
#include "rnnserve/v1/rnnserve.pb.h"

namespace rnnserve::client {

struct Args {
  std::string command;
  std::vector<std::string> positional;  // e.g. inspect's FILE
  std::map<std::string, std::vector<std::string>> flags;
  bool Has(const std::string& f) const { return flags.count(f) > 0; }
  std::string Get(const std::string& f, const std::string& fallback = "") const {
    auto it = flags.find(f);
    return it == flags.end() || it->second.empty() ? fallback : it->second.back();
  }
};

// `rnnserve-cli <command> [positional...] [--flag value | --flag=value | --json]...`
absl::StatusOr<Args> ParseArgs(int argc, char** argv);

// Reads every `--<flag> [NAME=]FILE` into arrays by name ("" for an unnamed single array).
absl::StatusOr<std::map<std::string, NpyArray>> ReadNamedFiles(const Args& args,
                                                               const std::string& flag);

// Comma-separated integers of a flag, e.g. --lengths 40,25,12.
absl::StatusOr<std::vector<int32_t>> IntList(const Args& args, const std::string& flag);

std::string TypeName(v1::DataType t);
// Row-major values as nested JSON arrays of the array's shape.
nlohmann::json Nest(const NpyArray& a);
// Prints "error: CODE: message" to stderr; returns exit code 1.
int Fail(const absl::Status& s);
// Prints named arrays: "name: FP32 [3,3]" and one line per row of the last axis.
void PrintArrays(const std::map<std::string, NpyArray>& arrays);

}  // namespace rnnserve::client
