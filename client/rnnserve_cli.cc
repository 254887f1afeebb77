// rnnserve-cli: talk to an rnnserve server from the shell.
//
//   rnnserve-cli predict  --server HOST:PORT --model NAME --input [NAME=]FILE ... [--lengths 40,25]
//                         [--version N] [--output FILE.npz] [--json]
//   rnnserve-cli list     --server HOST:PORT [--json]
//   rnnserve-cli metadata --server HOST:PORT --model NAME [--version N] [--json]
//   rnnserve-cli health   --address HOST:PORT [--service NAME]   (exit 0 when SERVING)

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_commands.h"
#include "client/cli_common.h"
#include "client/client.h"
#include "client/input_files.h"
#include "client/npy.h"

namespace rnnserve::client {
namespace {

using Json = nlohmann::json;

constexpr char kUsage[] =
    "usage: rnnserve-cli <command> [flags]\n"
    "  predict  --model NAME --input [NAME=]FILE [--input ...] [--lengths L1,L2,...]\n"
    "           [--version N] [--output FILE.npz] [--json]\n"
    "           FILE: .json (nested array, or {\"name\": array}), .npy, .npz or .csv\n"
    "  list     [--json]\n"
    "  metadata --model NAME [--version N] [--json]\n"
    "  evaluate --model NAME --input [NAME=]FILE --target [NAME=]FILE [--sample-weight FILE]\n"
    "           [--loss L] [--metrics m1,m2] [--batch-size N] [--lengths ...] [--json]\n"
    "  stream   --model NAME --input [NAME=]FILE --chunk-steps N [--sequence-id ID]\n"
    "           [--lengths ...] [--verbose] [--json]\n"
    "  load     --model NAME      (re)load from the server's repository\n"
    "  unload   --model NAME\n"
    "  server   [--json]          server metadata\n"
    "  health   [--service NAME]  grpc.health.v1 Check: prints the status; exit 0 when\n"
    "                             SERVING, 1 otherwise (default --timeout-ms 5000)\n"
    "  inspect  FILE [--json]     the architecture rnnserve would run, without a server\n"
    "common flags: --server HOST:PORT (or --address; default 127.0.0.1:8500), --timeout-ms N\n";

std::string Dims(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

int Predict(const Args& args, RnnServeClient& client) {
  const std::string model = args.Get("model");
  if (model.empty() || !args.Has("input")) {
    std::fputs("predict needs --model and --input\n", stderr);
    return 2;
  }
  auto inputs = ReadNamedFiles(args, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  auto lengths = IntList(args, "lengths");
  if (!lengths.ok()) return Fail(lengths.status());
  int64_t version = 0;
  if (args.Has("version") && !absl::SimpleAtoi(args.Get("version"), &version)) {
    return Fail(absl::InvalidArgumentError("--version must be an integer"));
  }
  auto resp = client.Predict(model, *inputs, *lengths, version);
  if (!resp.ok()) return Fail(resp.status());

  // Outputs in name order, which is stable across runs.
  std::map<std::string, NpyArray> outputs;
  for (const auto& [name, tensor] : resp->outputs()) outputs[name] = ToArray(tensor);
  if (args.Has("output")) {
    std::map<std::string, std::string> files;
    for (const auto& [name, a] : outputs) {
      if (a.descr == "<i8") {
        files[name] =
            SerializeNpyInt64(a.shape, std::vector<int64_t>(a.values.begin(), a.values.end()));
      } else {
        files[name] =
            SerializeNpyFloat32(a.shape, std::vector<float>(a.values.begin(), a.values.end()));
      }
    }
    if (auto s = WriteNpz(args.Get("output"), files); !s.ok()) return Fail(s);
  }
  if (args.Has("json")) {
    Json out;
    out["model"] = resp->model_spec().name();
    out["version"] = resp->model_spec().version();
    for (const auto& [name, a] : outputs) {
      out["outputs"][name] = {
          {"dtype", a.descr == "<i8" ? "INT64" : "FP32"}, {"shape", a.shape}, {"data", Nest(a)}};
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("model %s version %lld\n", resp->model_spec().name().c_str(),
              static_cast<long long>(resp->model_spec().version()));
  PrintArrays(outputs);
  if (args.Has("output")) std::printf("wrote %s\n", args.Get("output").c_str());
  return 0;
}

int List(const Args& args, RnnServeClient& client) {
  auto resp = client.List();
  if (!resp.ok()) return Fail(resp.status());
  if (args.Has("json")) {
    Json out = Json::array();
    for (const auto& m : resp->models()) {
      out.push_back({{"name", m.name()},
                     {"versions", std::vector<int64_t>(m.versions().begin(), m.versions().end())},
                     {"state", m.state()},
                     {"platform", m.platform()},
                     {"reason", m.reason()}});
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  for (const auto& m : resp->models()) {
    std::printf("%-24s %-12s versions [%s] %s%s\n", m.name().c_str(), m.state().c_str(),
                absl::StrJoin(m.versions(), ",").c_str(), m.platform().c_str(),
                m.reason().empty() ? "" : absl::StrCat("  (", m.reason(), ")").c_str());
  }
  return 0;
}

int Metadata(const Args& args, RnnServeClient& client) {
  int64_t version = 0;
  if (args.Has("version") && !absl::SimpleAtoi(args.Get("version"), &version)) {
    return Fail(absl::InvalidArgumentError("--version must be an integer"));
  }
  auto meta = client.Metadata(args.Get("model"), version);
  if (!meta.ok()) return Fail(meta.status());
  auto tensors = [](const auto& list) {
    Json out = Json::array();
    for (const auto& t : list) {
      out.push_back({{"name", t.name()},
                     {"dtype", TypeName(t.dtype())},
                     {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
    }
    return out;
  };
  if (args.Has("json")) {
    Json out = {
        {"name", meta->model_spec().name()},
        {"version", meta->model_spec().version()},
        {"versions", std::vector<int64_t>(meta->versions().begin(), meta->versions().end())},
        {"platform", meta->platform()},
        {"source_file", meta->source_file()},
        {"masking", meta->masking()},
        {"inputs", tensors(meta->inputs())},
        {"outputs", tensors(meta->outputs())}};
    out["instances"] = Json::array();
    for (const auto& inst : meta->instances()) {
      Json layers = Json::array();
      for (const auto& l : inst.layers()) {
        layers.push_back({{"layer", l.layer()}, {"engine", l.engine()}, {"reason", l.reason()}});
      }
      out["instances"].push_back({{"engine", inst.engine()},
                                  {"kind", inst.kind()},
                                  {"memory_bytes", inst.scratch_bytes()},
                                  {"layers", layers}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model %s version %lld (%s, %s masking)\n  file %s\n",
              meta->model_spec().name().c_str(),
              static_cast<long long>(meta->model_spec().version()), meta->platform().c_str(),
              meta->masking().c_str(), meta->source_file().c_str());
  for (const auto& t : meta->inputs()) {
    std::printf("  input  %-20s %-6s %s\n", t.name().c_str(), TypeName(t.dtype()).c_str(),
                Dims(t.shape()).c_str());
  }
  for (const auto& t : meta->outputs()) {
    std::printf("  output %-20s %-6s %s\n", t.name().c_str(), TypeName(t.dtype()).c_str(),
                Dims(t.shape()).c_str());
  }
  for (int i = 0; i < meta->instances_size(); ++i) {
    const auto& inst = meta->instances(i);
    std::printf("  instance %d: %s engine (%s), %lld bytes\n", i, inst.engine().c_str(),
                inst.kind().c_str(), static_cast<long long>(inst.scratch_bytes()));
    for (const auto& l : inst.layers()) {
      std::printf("    %-20s %-5s %s\n", l.layer().c_str(), l.engine().c_str(), l.reason().c_str());
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args.ok() || args->command == "help" || args->command == "--help" || args->Has("help")) {
    if (!args.ok()) std::fprintf(stderr, "%s\n", std::string(args.status().message()).c_str());
    std::fputs(kUsage, args.ok() ? stdout : stderr);
    return args.ok() ? 0 : 2;
  }
  if (args->command == "inspect") return InspectCommand(*args);
  ClientOptions options;
  options.server = args->Get("address", args->Get("server", options.server));
  // A probe answers fast or not at all: health waits 5 s unless told otherwise.
  if (args->command == "health") options.timeout_ms = 5000;
  if (args->Has("timeout-ms") && !absl::SimpleAtoi(args->Get("timeout-ms"), &options.timeout_ms)) {
    return Fail(absl::InvalidArgumentError("--timeout-ms must be an integer"));
  }
  if (args->command == "health") return HealthCommand(*args, options);
  RnnServeClient client(options);
  if (args->command == "predict") return Predict(*args, client);
  if (args->command == "list") return List(*args, client);
  if (args->command == "metadata") return Metadata(*args, client);
  if (args->command == "evaluate") return EvaluateCommand(*args, client);
  if (args->command == "stream") return StreamCommand(*args, client);
  if (args->command == "load") return LoadCommand(*args, client);
  if (args->command == "unload") return UnloadCommand(*args, client);
  if (args->command == "server") return ServerCommand(*args, client);
  std::fprintf(stderr, "unknown command '%s'\n%s", args->command.c_str(), kUsage);
  return 2;
}

}  // namespace
}  // namespace rnnserve::client

int main(int argc, char** argv) { return rnnserve::client::Main(argc, argv); }
