#include "client/cli_common.h"

#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/input_files.h"

namespace rnnserve::client {
namespace {

nlohmann::json NestFrom(const NpyArray& a, size_t depth, size_t* pos) {
  if (depth == a.shape.size()) return a.values[(*pos)++];
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < a.shape[depth]; ++i) out.push_back(NestFrom(a, depth + 1, pos));
  return out;
}

// `[NAME=]FILE[:ARRAY]`; ":ARRAY" is split off only after an .npz or .json file name.
struct FileSpec {
  std::string name, path, array;
};

FileSpec ParseSpec(const std::string& spec) {
  FileSpec out;
  const size_t eq = spec.find('=');
  out.name = eq == std::string::npos ? "" : spec.substr(0, eq);
  out.path = eq == std::string::npos ? spec : spec.substr(eq + 1);
  const size_t colon = out.path.rfind(':');
  if (colon != std::string::npos) {
    const std::string file = out.path.substr(0, colon);
    if (absl::EndsWith(file, ".npz") || absl::EndsWith(file, ".json")) {
      out.array = out.path.substr(colon + 1);
      out.path = file;
    }
  }
  return out;
}

std::string Keys(const NamedArrays& arrays) {
  return absl::StrJoin(arrays, ", ", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first.empty() ? "(unnamed)" : kv.first);
  });
}

}  // namespace

void AddConnectionFlags(CLI::App* command, ClientOptions* options) {
  command->add_option("--server,--address", options->server, "the server's gRPC address")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  command->add_option("--timeout-ms", options->timeout_ms, "deadline of each call")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // The files are read once the command line is parsed; a bad one ends the command.
  struct Files {
    std::string ca, cert, key, token;
  };
  auto files = std::make_shared<Files>();
  command->add_option("--tls-ca", files->ca, "PEM CA that signed the server's certificate: TLS")
      ->type_name("FILE");
  command->add_option("--tls-cert", files->cert, "PEM client certificate, for mutual TLS")
      ->type_name("FILE");
  command->add_option("--tls-key", files->key, "PEM private key of --tls-cert")->type_name("FILE");
  command
      ->add_option("--token-file", files->token,
                   "file whose first line is the bearer token sent with every call")
      ->type_name("FILE");
  command->parse_complete_callback([files, options] {
    if (files->ca.empty() && files->cert.empty() && files->key.empty() && files->token.empty()) {
      return;
    }
    if (absl::Status s =
            ReadConnectionFiles(files->ca, files->cert, files->key, files->token, options);
        !s.ok()) {
      throw CLI::ValidationError(std::string(s.message()));
    }
  });
}

absl::StatusOr<std::map<std::string, NpyArray>> ReadNamedFiles(
    const std::vector<std::string>& specs, const std::string& flag) {
  std::map<std::string, NpyArray> out;
  for (const std::string& text : specs) {
    const FileSpec spec = ParseSpec(text);
    auto arrays = ReadInputFile(spec.path);
    if (!arrays.ok()) return arrays.status();
    if (!spec.array.empty()) {
      auto it = arrays->find(spec.array);
      if (it == arrays->end()) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", text, ": ", spec.path,
                                                       " has no array '", spec.array,
                                                       "'; it holds: ", Keys(*arrays)));
      }
      *arrays = {{"", std::move(it->second)}};  // NAME, or the model's only input
    } else if (!spec.name.empty() && arrays->size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " ", text, ": ", spec.path, " holds ", arrays->size(), " arrays (",
          Keys(*arrays), "): pick one with ", spec.name, "=", spec.path, ":ARRAY"));
    }
    for (auto& [key, array] : *arrays) {
      const std::string input = !spec.name.empty() ? spec.name : key;
      if (out.count(input)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": '", input.empty() ? spec.path : input, "' given twice"));
      }
      out[input] = std::move(array);
    }
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

absl::Status WriteArraysNpz(const std::string& path,
                            const std::map<std::string, NpyArray>& arrays) {
  std::map<std::string, std::string> files;
  for (const auto& [name, a] : arrays) {
    files[name] =
        a.descr == "<i8"
            ? SerializeNpyInt64(a.shape, std::vector<int64_t>(a.values.begin(), a.values.end()))
            : SerializeNpyFloat32(a.shape, std::vector<float>(a.values.begin(), a.values.end()));
  }
  return WriteNpz(path, files);
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
