#include "client/cli_commands.h"

#include <chrono>
#include <cstdio>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rnnserve::client {
namespace {

using Json = nlohmann::json;

int Usage(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  return 2;
}

}  // namespace

int EvaluateCommand(const Args& args, RnnServeClient& client) {
  const std::string model = args.Get("model");
  if (model.empty() || !args.Has("input") || !args.Has("target")) {
    return Usage("evaluate needs --model, --input and --target");
  }
  auto inputs = ReadNamedFiles(args, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  auto targets = ReadNamedFiles(args, "target");
  if (!targets.ok()) return Fail(targets.status());
  RnnServeClient::EvaluateOptions options;
  options.loss = args.Get("loss");
  if (args.Has("metrics")) options.metrics = absl::StrSplit(args.Get("metrics"), ',');
  auto lengths = IntList(args, "lengths");
  if (!lengths.ok()) return Fail(lengths.status());
  options.lengths = *lengths;
  if (args.Has("batch-size") &&
      (!absl::SimpleAtoi(args.Get("batch-size"), &options.batch_size) || options.batch_size <= 0)) {
    return Fail(absl::InvalidArgumentError("--batch-size must be a positive integer"));
  }
  std::map<std::string, NpyArray> weights;
  if (args.Has("sample-weight")) {
    auto w = ReadNamedFiles(args, "sample-weight");
    if (!w.ok()) return Fail(w.status());
    if (w->size() != 1) return Fail(absl::InvalidArgumentError("--sample-weight takes one array"));
    weights = std::move(*w);
    options.sample_weight = &weights.begin()->second;
  }
  auto resp = client.Evaluate(model, *inputs, *targets, options);
  if (!resp.ok()) return Fail(resp.status());
  if (args.Has("json")) {
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

int StreamCommand(const Args& args, RnnServeClient& client) {
  const std::string model = args.Get("model");
  int64_t chunk = 0;
  if (model.empty() || !args.Has("input") || !absl::SimpleAtoi(args.Get("chunk-steps"), &chunk) ||
      chunk <= 0) {
    return Usage("stream needs --model, --input and --chunk-steps N (N > 0)");
  }
  auto inputs = ReadNamedFiles(args, "input");
  if (!inputs.ok()) return Fail(inputs.status());
  if (inputs->size() != 1) return Fail(absl::InvalidArgumentError("stream takes one input array"));
  auto lengths = IntList(args, "lengths");
  if (!lengths.ok()) return Fail(lengths.status());
  uint64_t first_id = 1;
  if (args.Has("sequence-id") && !absl::SimpleAtoi(args.Get("sequence-id"), &first_id)) {
    return Fail(absl::InvalidArgumentError("--sequence-id must be a non-negative integer"));
  }
  // The last answer of each sequence is its prediction for the whole sequence.
  std::map<int64_t, std::map<std::string, NpyArray>> last;
  Json chunks = Json::array();
  const bool verbose = args.Has("verbose");
  const auto status = client.StreamSequences(
      model, inputs->begin()->second, chunk, *lengths, first_id,
      [&](int64_t seq, int64_t end_step, const v1::StreamPredictResponse& resp) {
        std::map<std::string, NpyArray> outs;
        for (const auto& [name, t] : resp.outputs()) outs[name] = ToArray(t);
        if (verbose && !args.Has("json")) {
          std::printf("sequence %lld through step %lld\n", static_cast<long long>(seq),
                      static_cast<long long>(end_step));
          PrintArrays(outs);
        }
        last[seq] = std::move(outs);
      });
  if (!status.ok()) return Fail(status);
  if (args.Has("json")) {
    Json out = Json::array();
    for (const auto& [seq, outs] : last) {
      Json o = {{"sequence", seq}, {"sequence_id", first_id + seq}};
      for (const auto& [name, a] : outs)
        o["outputs"][name] = {{"shape", a.shape}, {"data", Nest(a)}};
      out.push_back(o);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  for (const auto& [seq, outs] : last) {
    std::printf("sequence %lld (id %llu), final chunk:\n", static_cast<long long>(seq),
                static_cast<unsigned long long>(first_id + seq));
    PrintArrays(outs);
  }
  return 0;
}

int LoadCommand(const Args& args, RnnServeClient& client) {
  if (args.Get("model").empty()) return Usage("load needs --model");
  auto resp = client.Load(args.Get("model"));
  if (!resp.ok()) return Fail(resp.status());
  std::printf("%s %s versions [%s]\n", resp->status().name().c_str(),
              resp->status().state().c_str(),
              absl::StrJoin(resp->status().versions(), ",").c_str());
  return 0;
}

int UnloadCommand(const Args& args, RnnServeClient& client) {
  if (args.Get("model").empty()) return Usage("unload needs --model");
  if (auto s = client.Unload(args.Get("model")); !s.ok()) return Fail(s);
  std::printf("%s unloaded\n", args.Get("model").c_str());
  return 0;
}

int ServerCommand(const Args& args, RnnServeClient& client) {
  auto resp = client.ServerMetadata();
  if (!resp.ok()) return Fail(resp.status());
  if (args.Has("json")) {
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

int HealthCommand(const Args& args, const ClientOptions& options) {
  using grpc::health::v1::HealthCheckResponse;
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(options.server, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(options.timeout_ms));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args.Get("service"));
  HealthCheckResponse response;
  const grpc::Status s = stub->Check(&ctx, request, &response);
  if (!s.ok()) {
    return Fail(absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                             absl::StrCat(options.server, ": ", s.error_message())));
  }
  std::printf("%s\n", HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  return response.status() == HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace rnnserve::client
