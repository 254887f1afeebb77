#pragma once

// Reading user inputs for rnnserve-cli: JSON (a nested array, or an object of named nested
// arrays), .npy (one array), .npz (named arrays) and CSV (rows of numbers: one sequence,
// [1, rows, cols]).

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "client/npy.h"

namespace rnnserve::client {

// Arrays keyed by input name; an unnamed array (a .npy, a bare JSON array, a CSV) has key "".
using NamedArrays = std::map<std::string, NpyArray>;

absl::StatusOr<NamedArrays> ReadInputFile(const std::string& path);

// A nested JSON array of numbers -> shape and row-major values; errors name `what`.
absl::StatusOr<NpyArray> ParseJsonArray(const std::string& json_text, const std::string& what);

}  // namespace rnnserve::client
