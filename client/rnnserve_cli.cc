// rnnserve-cli: talk to an rnnserve server from the shell. `rnnserve-cli --help` lists the
// commands; `rnnserve-cli COMMAND --help` lists a command's flags.
//
//   rnnserve-cli predict  --server HOST:PORT --model NAME --input [NAME=]FILE[:ARRAY] ...
//                         [--lengths 40,25] [--version N] [--output FILE.npz] [--json]
//   rnnserve-cli list     --server HOST:PORT [--json]
//   rnnserve-cli metadata --server HOST:PORT --model NAME [--version N] [--json]
//   rnnserve-cli health   --address HOST:PORT [--service NAME]   (exit 0 when SERVING)

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_commands.h"
#include "client/cli_common.h"
#include "client/client.h"
#include "client/npy.h"

namespace rnnserve::client {
namespace {

using Json = nlohmann::json;

std::string Dims(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// " (why)", or nothing for no reason.
std::string Reason(const std::string& why) {
  return why.empty() ? "" : absl::StrCat(" (", why, ")");
}

struct PredictFlags {
  ClientOptions connection;
  std::string model;
  std::vector<std::string> inputs;
  std::vector<int32_t> lengths;
  int64_t version = 0;
  std::string output;
  bool json = false;
};

int Predict(const PredictFlags& f) {
  auto inputs = ReadNamedFiles(f.inputs, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  RnnServeClient client(f.connection);
  auto resp = client.Predict(f.model, *inputs, f.lengths, f.version);
  if (!resp.ok()) return Fail(resp.status());

  // Outputs in name order, which is stable across runs.
  std::map<std::string, NpyArray> outputs;
  for (const auto& [name, tensor] : resp->outputs()) outputs[name] = ToArray(tensor);
  if (!f.output.empty()) {
    if (auto s = WriteArraysNpz(f.output, outputs); !s.ok()) return Fail(s);
  }
  if (f.json) {
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
  if (!f.output.empty()) std::printf("wrote %s\n", f.output.c_str());
  return 0;
}

int List(const ClientOptions& connection, bool json) {
  RnnServeClient client(connection);
  auto resp = client.List();
  if (!resp.ok()) return Fail(resp.status());
  if (json) {
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

struct MetadataFlags {
  ClientOptions connection;
  std::string model;
  int64_t version = 0;
  bool json = false;
};

int Metadata(const MetadataFlags& f) {
  RnnServeClient client(f.connection);
  auto meta = client.Metadata(f.model, f.version);
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
  if (f.json) {
    Json out = {
        {"name", meta->model_spec().name()},
        {"version", meta->model_spec().version()},
        {"versions", std::vector<int64_t>(meta->versions().begin(), meta->versions().end())},
        {"platform", meta->platform()},
        {"source_file", meta->source_file()},
        {"masking", meta->masking()},
        {"streamable", meta->streamable()},
        {"streamable_reason", meta->streamable_reason()},
        {"scheduler", meta->scheduler()},
        {"scheduler_reason", meta->scheduler_reason()},
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
                                  {"reason", inst.reason()},
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
  std::printf("  scheduler %s%s\n  streaming %s%s\n", meta->scheduler().c_str(),
              Reason(meta->scheduler_reason()).c_str(), meta->streamable() ? "yes" : "no",
              Reason(meta->streamable_reason()).c_str());
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
    std::printf("  instance %d: %s engine (%s), %lld bytes%s\n", i, inst.engine().c_str(),
                inst.kind().c_str(), static_cast<long long>(inst.scratch_bytes()),
                Reason(inst.reason()).c_str());
    for (const auto& l : inst.layers()) {
      std::printf("    %-20s %-5s %s\n", l.layer().c_str(), l.engine().c_str(), l.reason().c_str());
    }
  }
  return 0;
}

Command AddPredictCommand(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand("predict", "run a model on input files");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  cmd->add_option("--input", f->inputs,
                  "[NAME=]FILE[:ARRAY], repeatable. FILE: .json (nested array, or {\"name\": "
                  "array}), .npy, .npz or .csv; NAME: the model input (default: the file's own "
                  "names, or the model's only input); :ARRAY picks one array of an .npz or "
                  "JSON object")
      ->required();
  cmd->add_option("--lengths", f->lengths, "each sequence's length, e.g. 40,25,12")->delimiter(',');
  cmd->add_option("--version", f->version, "the model version (default: the newest)");
  cmd->add_option("--output", f->output, "also write the outputs to this .npz");
  cmd->add_flag("--json", f->json, "print JSON");
  return {cmd, [f] { return Predict(*f); }};
}

Command AddListCommand(CLI::App& app) {
  return AddJsonCommand(app, "list", "the models in the server's repository", List);
}

Command AddMetadataCommand(CLI::App& app) {
  auto f = std::make_shared<MetadataFlags>();
  CLI::App* cmd = app.add_subcommand(
      "metadata", "a model's inputs, outputs, and the engine that runs each layer");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  cmd->add_option("--version", f->version, "the model version (default: the newest)");
  cmd->add_flag("--json", f->json, "print JSON");
  return {cmd, [f] { return Metadata(*f); }};
}

int Main(int argc, char** argv) {
  CLI::App app("rnnserve-cli: talk to an rnnserve server from the shell", "rnnserve-cli");
  // At most one command; none is answered below (CLI11 would report a missing command before an
  // unknown one, which then goes unnamed).
  app.require_subcommand(0, 1);
  // A flag given twice takes its last value; the commands inherit this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(
      "`rnnserve-cli COMMAND --help` lists a command's flags. To describe a model file "
      "without a server: rnnserve inspect FILE");
  const std::vector<Command> commands = {AddPredictCommand(app),  AddListCommand(app),
                                         AddMetadataCommand(app), AddEvaluateCommand(app),
                                         AddStreamCommand(app),   AddGenerateCommand(app),
                                         AddLoadCommand(app),     AddUnloadCommand(app),
                                         AddServerCommand(app),   AddHealthCommand(app)};
  if (argc == 2 && std::string_view(argv[1]) == "help") {  // `rnnserve-cli help`, as before
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const Command& c : commands) {
    if (c.command->parsed()) return c.run();
  }
  std::fprintf(stderr, "rnnserve-cli: a command is required\n%s", app.help().c_str());
  return 2;
}

}  // namespace
}  // namespace rnnserve::client

int main(int argc, char** argv) { return rnnserve::client::Main(argc, argv); }
