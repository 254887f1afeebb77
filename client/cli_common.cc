#include "client/cli_common.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/input_files.h"

namespace rnnserve::client {
namespace {

nlohmann::json NestFrom(const NpyArray& a, size_t depth, size_t* pos) {
  if (depth == a.shape.size()) return a.values[(*pos)++];
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < a.shape[depth]; ++i) out.push_back(NestFrom(a, depth + 1, pos));
  return out;
}

}  // namespace

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  if (argc < 2) return absl::InvalidArgumentError("missing command");
  Args args;
  args.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      args.positional.push_back(a);
      continue;
    }
    a = a.substr(2);
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      args.flags[a.substr(0, eq)].push_back(a.substr(eq + 1));
    } else if (a == "json" || a == "help" || a == "verbose") {
      args.flags[a].push_back("true");
    } else if (i + 1 < argc) {
      args.flags[a].push_back(argv[++i]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", a, " needs a value"));
    }
  }
  return args;
}

absl::StatusOr<std::map<std::string, NpyArray>> ReadNamedFiles(const Args& args,
                                                               const std::string& flag) {
  std::map<std::string, NpyArray> out;
  auto it = args.flags.find(flag);
  if (it == args.flags.end()) return out;
  for (const std::string& spec : it->second) {
    const size_t eq = spec.find('=');
    const std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    auto arrays = ReadInputFile(path);
    if (!arrays.ok()) return arrays.status();
    for (auto& [key, array] : *arrays) {
      // NAME=FILE names a file's single array; a file's own names are used otherwise.
      const std::string input = !name.empty() ? name : key;
      if (out.count(input)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": '", input.empty() ? path : input, "' given twice"));
      }
      out[input] = std::move(array);
    }
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> IntList(const Args& args, const std::string& flag) {
  std::vector<int32_t> out;
  if (!args.Has(flag)) return out;
  for (absl::string_view part : absl::StrSplit(args.Get(flag), ',')) {
    int32_t v;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", part, "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

std::string TypeName(v1::DataType t) {
  std::string n = v1::DataType_Name(t);
  return n.rfind("TYPE_", 0) == 0 ? n.substr(5) : n;
}

nlohmann::json Nest(const NpyArray& a) {
  size_t pos = 0;
  return NestFrom(a, 0, &pos);
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s: %s\n", absl::StatusCodeToString(s.code()).c_str(),
               std::string(s.message()).c_str());
  return 1;
}

void PrintArrays(const std::map<std::string, NpyArray>& arrays) {
  for (const auto& [name, a] : arrays) {
    std::printf("%s: %s [%s]\n", name.c_str(), a.descr == "<i8" ? "INT64" : "FP32",
                absl::StrJoin(a.shape, ",").c_str());
    const int64_t cols = a.shape.empty() ? 1 : a.shape.back();
    for (size_t r = 0; cols > 0 && r * cols < a.values.size(); ++r) {
      std::string row;
      for (int64_t c = 0; c < cols; ++c) {
        absl::StrAppend(&row, c ? ", " : "", absl::StrFormat("%.6g", a.values[r * cols + c]));
      }
      std::printf("  [%s]\n", row.c_str());
    }
  }
}

}  // namespace rnnserve::client
