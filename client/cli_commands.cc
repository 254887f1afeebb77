#include "client/cli_commands.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_common.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rnnserve::client {
namespace {

using Json = nlohmann::json;

struct EvaluateFlags {
  ClientOptions connection;
  std::string model;
  std::vector<std::string> inputs, targets, sample_weight;
  std::string loss;
  std::vector<std::string> metrics;
  std::vector<int32_t> lengths;
  int64_t batch_size = 0;
  bool json = false;
};

int Evaluate(const EvaluateFlags& f) {
  auto inputs = ReadNamedFiles(f.inputs, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  auto targets = ReadNamedFiles(f.targets, "target");
  if (!targets.ok()) return Fail(targets.status());
  RnnServeClient::EvaluateOptions options{
      .loss = f.loss, .metrics = f.metrics, .lengths = f.lengths, .batch_size = f.batch_size};
  auto weights = ReadNamedFiles(f.sample_weight, "sample-weight");
  if (!weights.ok()) return Fail(weights.status());
  if (weights->size() > 1) {
    return Fail(absl::InvalidArgumentError("--sample-weight takes one array"));
  }
  if (!weights->empty()) options.sample_weight = &weights->begin()->second;
  RnnServeClient client(f.connection);
  auto resp = client.Evaluate(f.model, *inputs, *targets, options);
  if (!resp.ok()) return Fail(resp.status());
  if (f.json) {
    Json out = {{"model", resp->model_spec().name()},
                {"version", resp->model_spec().version()},
                {"samples", resp->samples()},
                {"loss_name", resp->loss_name()},
                {"loss", resp->loss()}};
    out["metrics"] = Json::object();
    for (const auto& [name, value] : resp->metrics()) out["metrics"][name] = value;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("model %s version %lld, %lld samples\n", resp->model_spec().name().c_str(),
              static_cast<long long>(resp->model_spec().version()),
              static_cast<long long>(resp->samples()));
  std::printf("  loss (%s): %.8g\n", resp->loss_name().c_str(), resp->loss());
  std::map<std::string, double> metrics(resp->metrics().begin(), resp->metrics().end());
  for (const auto& [name, value] : metrics) std::printf("  %s: %.8g\n", name.c_str(), value);
  return 0;
}

struct StreamFlags {
  ClientOptions connection;
  std::string model;
  std::vector<std::string> inputs;
  int64_t chunk_steps = 0;
  uint64_t sequence_id = 1;
  std::vector<int32_t> lengths;
  std::string output;
  bool verbose = false;
  bool json = false;
};

// Each output of every sequence's final answer ([1, ...] each), stacked along axis 0 in sequence
// order: [sequences, ...], as predict gives a batch's. Outputs whose final answers differ in
// shape between sequences (per-step outputs of final chunks of different lengths) cannot stack.
absl::StatusOr<std::map<std::string, NpyArray>> StackFinalAnswers(
    const std::map<int64_t, std::map<std::string, NpyArray>>& last) {
  std::map<std::string, NpyArray> out;
  for (const auto& [seq, outs] : last) {
    for (const auto& [name, a] : outs) {
      auto [it, first] = out.try_emplace(name, a);
      NpyArray& stacked = it->second;
      const bool stacks = !a.shape.empty() && a.shape[0] == 1 &&
                          std::equal(a.shape.begin() + 1, a.shape.end(), stacked.shape.begin() + 1,
                                     stacked.shape.end());
      if (!stacks) {
        std::vector<int64_t> want = stacked.shape;
        if (!want.empty()) want[0] = 1;
        return absl::InvalidArgumentError(
            absl::StrCat("--output: output '", name, "' of sequence ", seq, " has shape [",
                         absl::StrJoin(a.shape, ","), "], not [", absl::StrJoin(want, ","),
                         "]: final answers of different shapes do not stack (use --json)"));
      }
      if (first) continue;
      stacked.shape[0] += 1;
      stacked.values.insert(stacked.values.end(), a.values.begin(), a.values.end());
    }
  }
  return out;
}

int Stream(const StreamFlags& f) {
  auto inputs = ReadNamedFiles(f.inputs, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  if (inputs->size() != 1) return Fail(absl::InvalidArgumentError("stream takes one input array"));
  // The last answer of each sequence is its prediction for the whole sequence.
  std::map<int64_t, std::map<std::string, NpyArray>> last;
  RnnServeClient client(f.connection);
  const auto status = client.StreamSequences(
      f.model, inputs->begin()->second, f.chunk_steps, f.lengths, f.sequence_id,
      [&](int64_t seq, int64_t end_step, const v1::StreamPredictResponse& resp) {
        std::map<std::string, NpyArray> outs;
        for (const auto& [name, t] : resp.outputs()) outs[name] = ToArray(t);
        if (f.verbose && !f.json) {
          std::printf("sequence %lld through step %lld\n", static_cast<long long>(seq),
                      static_cast<long long>(end_step));
          PrintArrays(outs);
        }
        last[seq] = std::move(outs);
      });
  if (!status.ok()) return Fail(status);
  if (!f.output.empty()) {
    auto stacked = StackFinalAnswers(last);
    if (!stacked.ok()) return Fail(stacked.status());
    if (auto s = WriteArraysNpz(f.output, *stacked); !s.ok()) return Fail(s);
  }
  if (f.json) {
    Json out = Json::array();
    for (const auto& [seq, outs] : last) {
      Json o = {{"sequence", seq}, {"sequence_id", f.sequence_id + seq}};
      for (const auto& [name, a] : outs)
        o["outputs"][name] = {{"shape", a.shape}, {"data", Nest(a)}};
      out.push_back(o);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  for (const auto& [seq, outs] : last) {
    std::printf("sequence %lld (id %llu), final chunk:\n", static_cast<long long>(seq),
                static_cast<unsigned long long>(f.sequence_id + seq));
    PrintArrays(outs);
  }
  if (!f.output.empty()) std::printf("wrote %s\n", f.output.c_str());
  return 0;
}

// A command whose flags are the connection's and --model.
Command AddModelCommand(CLI::App& app, const std::string& name, const std::string& description,
                        std::function<int(RnnServeClient&, const std::string& model)> run) {
  struct Flags {
    ClientOptions connection;
    std::string model;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(name, description);
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  return {cmd, [f, run] {
            RnnServeClient client(f->connection);
            return run(client, f->model);
          }};
}

int Server(const ClientOptions& connection, bool json) {
  RnnServeClient client(connection);
  auto resp = client.ServerMetadata();
  if (!resp.ok()) return Fail(resp.status());
  if (json) {
    Json out = {{"name", resp->name()},
                {"version", resp->version()},
                {"extensions",
                 std::vector<std::string>(resp->extensions().begin(), resp->extensions().end())},
                {"gpu_available", resp->gpu_available()},
                {"gpu_reason", resp->gpu_reason()},
                {"model_repository", resp->model_repository()}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%s %s, repository %s\n  extensions: %s\n  GPU: %s\n", resp->name().c_str(),
              resp->version().c_str(), resp->model_repository().c_str(),
              absl::StrJoin(resp->extensions(), ", ").c_str(),
              resp->gpu_available() ? "available" : resp->gpu_reason().c_str());
  return 0;
}

int Health(const ClientOptions& connection, const std::string& service) {
  using grpc::health::v1::HealthCheckResponse;
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(connection.server, ChannelCredentials(connection)));
  const std::unique_ptr<grpc::ClientContext> ctx = NewContext(connection);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status s = stub->Check(ctx.get(), request, &response);
  if (!s.ok()) {
    return Fail(absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                             absl::StrCat(connection.server, ": ", s.error_message())));
  }
  std::printf("%s\n", HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  return response.status() == HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

Command AddJsonCommand(CLI::App& app, const std::string& name, const std::string& description,
                       std::function<int(const ClientOptions&, bool json)> run) {
  struct Flags {
    ClientOptions connection;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(name, description);
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_flag("--json", f->json, "print JSON");
  return {cmd, [f, run] { return run(f->connection, f->json); }};
}

Command AddEvaluateCommand(CLI::App& app) {
  auto f = std::make_shared<EvaluateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate", "loss and metrics of a model on inputs and targets, as Keras's evaluate");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  cmd->add_option("--input", f->inputs, "[NAME=]FILE[:ARRAY]: the inputs (as for predict)")
      ->required();
  cmd->add_option("--target", f->targets, "[NAME=]FILE[:ARRAY]: the expected outputs")->required();
  cmd->add_option("--sample-weight", f->sample_weight, "FILE[:ARRAY]: one weight per sample")
      ->expected(1);
  cmd->add_option("--loss", f->loss, "a Keras loss name (default: the model's own)");
  cmd->add_option("--metrics", f->metrics, "Keras metric names (default: the model's own)")
      ->delimiter(',');
  cmd->add_option("--batch-size", f->batch_size,
                  "send EvaluateStream chunks of this many sequences (default: one request)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lengths", f->lengths, "each sequence's length, e.g. 40,25,12")->delimiter(',');
  cmd->add_flag("--json", f->json, "print JSON");
  return {cmd, [f] { return Evaluate(*f); }};
}

Command AddStreamCommand(CLI::App& app) {
  auto f = std::make_shared<StreamFlags>();
  CLI::App* cmd = app.add_subcommand(
      "stream",
      "StreamPredict: each sequence of a [B, T, ...] input as a stateful sequence, "
      "sent in chunks of steps");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--model", f->model, "the model's name")->required();
  cmd->add_option("--input", f->inputs, "[NAME=]FILE[:ARRAY]: one input array")->required();
  cmd->add_option("--chunk-steps", f->chunk_steps, "time steps per chunk")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sequence-id", f->sequence_id,
                  "id of the first sequence; the others count up from it")
      ->capture_default_str();
  cmd->add_option("--lengths", f->lengths, "each sequence's length, e.g. 40,25,12")->delimiter(',');
  cmd->add_option("--output", f->output,
                  "also write each sequence's final answer to this .npz, one row per sequence "
                  "(as predict --output)");
  cmd->add_flag("--verbose", f->verbose, "print every chunk's answer");
  cmd->add_flag("--json", f->json, "print JSON");
  return {cmd, [f] { return Stream(*f); }};
}

Command AddLoadCommand(CLI::App& app) {
  return AddModelCommand(app, "load", "(re)load a model from the server's repository",
                         [](RnnServeClient& client, const std::string& model) {
                           auto resp = client.Load(model);
                           if (!resp.ok()) return Fail(resp.status());
                           std::printf("%s %s versions [%s]\n", resp->status().name().c_str(),
                                       resp->status().state().c_str(),
                                       absl::StrJoin(resp->status().versions(), ",").c_str());
                           return 0;
                         });
}

Command AddUnloadCommand(CLI::App& app) {
  return AddModelCommand(app, "unload", "stop serving a model",
                         [](RnnServeClient& client, const std::string& model) {
                           if (auto s = client.Unload(model); !s.ok()) return Fail(s);
                           std::printf("%s unloaded\n", model.c_str());
                           return 0;
                         });
}

Command AddServerCommand(CLI::App& app) {
  return AddJsonCommand(app, "server", "the server's metadata", Server);
}

Command AddHealthCommand(CLI::App& app) {
  struct Flags {
    ClientOptions connection{.timeout_ms = 5000};  // a probe answers fast or not at all
    std::string service;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "health", "grpc.health.v1 Check: prints the status; exit 0 when SERVING, 1 otherwise");
  AddConnectionFlags(cmd, &f->connection);
  cmd->add_option("--service", f->service,
                  "a service's full name, e.g. rnnserve.v1.RnnServe (default: the whole server)");
  return {cmd, [f] { return Health(f->connection, f->service); }};
}

}  // namespace rnnserve::client
