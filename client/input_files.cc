#include "client/input_files.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::client {
namespace {

using Json = nlohmann::json;

absl::Status Flatten(const Json& node, size_t depth, NpyArray* out, bool* integral,
                     const std::string& what) {
  if (node.is_number()) {
    if (depth != out->shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": a number at depth ", depth, " where the array has rank ", out->shape.size()));
    }
    *integral &= node.is_number_integer();
    out->values.push_back(node.get<double>());
    return absl::OkStatus();
  }
  if (!node.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected numbers or arrays, found ", node.type_name()));
  }
  if (depth == out->shape.size()) {
    if (depth > 8) return absl::InvalidArgumentError(absl::StrCat(what, ": nested too deep"));
    out->shape.push_back(static_cast<int64_t>(node.size()));
  } else if (depth > out->shape.size() || out->shape[depth] != static_cast<int64_t>(node.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ragged array at depth ", depth, " (", node.size(), " entries where others have ",
        depth < out->shape.size() ? out->shape[depth] : 0, ")"));
  }
  for (const Json& child : node) {
    if (auto s = Flatten(child, depth + 1, out, integral, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<NpyArray> FromJson(const Json& node, const std::string& what) {
  NpyArray out;
  bool integral = true;
  if (auto s = Flatten(node, 0, &out, &integral, what); !s.ok()) return s;
  out.descr = integral ? "<i8" : "<f8";
  return out;
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<NpyArray> ParseCsv(const std::string& text, const std::string& what) {
  NpyArray out;
  out.descr = "<f8";
  int64_t rows = 0, cols = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cols >= 0 && static_cast<int64_t>(cells.size()) != cols) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": row ", rows + 1, " has ",
                                                     cells.size(), " columns, expected ", cols));
    }
    cols = static_cast<int64_t>(cells.size());
    for (absl::string_view cell : cells) {
      double v;
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(cell), &v)) {
        if (rows == 0 && cols > 0 && out.values.empty()) break;  // a header row
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": row ", rows + 1, ": '", cell, "' is not a number"));
      }
      out.values.push_back(v);
    }
    if (!out.values.empty()) ++rows;
  }
  if (rows == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": no rows"));
  out.shape = {1, rows, cols};
  return out;
}

}  // namespace

absl::StatusOr<NpyArray> ParseJsonArray(const std::string& json_text, const std::string& what) {
  try {
    return FromJson(Json::parse(json_text), what);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON: ", e.what()));
  }
}

absl::StatusOr<NamedArrays> ReadInputFile(const std::string& path) {
  NamedArrays out;
  if (absl::EndsWith(path, ".npy")) {
    auto a = ReadNpy(path);
    if (!a.ok()) return a.status();
    out[""] = std::move(*a);
    return out;
  }
  if (absl::EndsWith(path, ".npz")) {
    auto arrays = ReadNpz(path);
    if (!arrays.ok()) return arrays.status();
    return NamedArrays(arrays->begin(), arrays->end());
  }
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  if (absl::EndsWith(path, ".csv")) {
    auto a = ParseCsv(*text, path);
    if (!a.ok()) return a.status();
    out[""] = std::move(*a);
    return out;
  }
  try {
    const Json doc = Json::parse(*text);
    if (doc.is_object()) {
      for (const auto& [name, value] : doc.items()) {
        auto a = FromJson(value, absl::StrCat(path, ": '", name, "'"));
        if (!a.ok()) return a.status();
        out[name] = std::move(*a);
      }
    } else {
      auto a = FromJson(doc, path);
      if (!a.ok()) return a.status();
      out[""] = std::move(*a);
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
  return out;
}

}  // namespace rnnserve::client
