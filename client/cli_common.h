#pragma once

// Pieces shared by rnnserve-cli's commands: connection flags, input files, output formatting.

#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "client/npy.h"
#include "rnnserve/v1/rnnserve.pb.h"

namespace rnnserve::client {

// Adds --server (also spelled --address) and --timeout-ms to a command, bound to *options; the
// help shows options' values as the defaults.
void AddConnectionFlags(CLI::App* command, ClientOptions* options);

// Reads every `[NAME=]FILE[:ARRAY]` of a repeated flag (`flag` names it in errors) into arrays
// by input name. FILE is .json, .npy, .npz or .csv. A file's own array names are used unless
// NAME is given; an unnamed array (.npy, .csv, a bare JSON array) has name "" (the model's only
// input). ":ARRAY" picks one array of an .npz or a JSON object (named NAME, or "" without
// NAME); NAME= with a file that holds several arrays needs it.
absl::StatusOr<std::map<std::string, NpyArray>> ReadNamedFiles(
    const std::vector<std::string>& specs, const std::string& flag);

std::string TypeName(v1::DataType t);
// Row-major values as nested JSON arrays of the array's shape.
nlohmann::json Nest(const NpyArray& a);
// Prints "error: CODE: message" to stderr; returns exit code 1.
int Fail(const absl::Status& s);
// Writes named arrays to an .npz (int64 arrays as "<i8", the others as "<f4").
absl::Status WriteArraysNpz(const std::string& path, const std::map<std::string, NpyArray>& arrays);
// Prints named arrays: "name: FP32 [3,3]" and one line per row of the last axis.
void PrintArrays(const std::map<std::string, NpyArray>& arrays);

}  // namespace rnnserve::client
