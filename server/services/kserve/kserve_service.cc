#include "server/services/kserve/kserve_service.h"

#include <chrono>
#include <functional>
#include <future>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/sequence_runner.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/log.h"
#include "server/services/kserve/datatype.h"
#include "server/services/kserve/infer_codec.h"
#include "server/services/kserve/model_config_view.h"

namespace rnnserve::server::kserve {
namespace {

// "" -> 0 (the newest loaded version).
absl::StatusOr<int64_t> ParseVersion(const std::string& version) {
  if (version.empty()) return 0;
  int64_t v = 0;
  if (!absl::SimpleAtoi(version, &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model version '", version, "': must be a positive integer, or empty for the newest"));
  }
  return v;
}

absl::StatusOr<std::shared_ptr<const Servable>> Find(const ModelRepository& repository,
                                                     const std::string& name,
                                                     const std::string& version) {
  if (name.empty()) return absl::InvalidArgumentError("model name: must not be empty");
  auto v = ParseVersion(version);
  if (!v.ok()) return v.status();
  return repository.Get(name, *v);
}

void FillTensor(const TensorSignature& sig, inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(sig.name);
  out->set_datatype(DatatypeName(sig.dtype));
  for (int64_t d : sig.shape) out->add_shape(d);
}

}  // namespace

bool KServeService::Live() const {
  return options_.readiness == nullptr || options_.readiness->Live();
}

absl::Status KServeService::CheckReady() const {
  return options_.readiness != nullptr ? options_.readiness->CheckReady()
                                       : Readiness(repository_, {}).CheckReady();
}

absl::StatusOr<bool> KServeService::ModelIsReady(const std::string& name,
                                                 const std::string& version) const {
  auto servable = Find(*repository_, name, version);
  // Unknown, or known but failed to load (UNAVAILABLE): not ready, which is an answer, not an
  // error (tritonclient's is_model_ready raises on errors).
  if (!servable.ok() && servable.status().code() != absl::StatusCode::kNotFound &&
      servable.status().code() != absl::StatusCode::kUnavailable) {
    return servable.status();
  }
  return servable.ok();
}

inference::ServerMetadataResponse KServeService::Metadata() const {
  inference::ServerMetadataResponse response;
  response.set_name(options_.server_name);
  response.set_version(options_.server_version);
  response.add_extensions("model_configuration");
  response.add_extensions("model_repository");
  response.add_extensions("statistics");
  if (options_.sequences != nullptr) response.add_extensions("sequence");
  return response;
}

absl::StatusOr<inference::ModelMetadataResponse> KServeService::Metadata(
    const std::string& name, const std::string& version) const {
  auto servable = Find(*repository_, name, version);
  if (!servable.ok()) return servable.status();
  const Servable& model = **servable;
  inference::ModelMetadataResponse response;
  response.set_name(model.name());
  for (const ModelState& state : repository_->List()) {
    if (state.name != model.name()) continue;
    for (int64_t v : state.versions) response.add_versions(std::to_string(v));
  }
  response.set_platform(model.platform());
  for (const auto& sig : model.inputs()) FillTensor(sig, response.add_inputs());
  for (const auto& sig : model.outputs()) FillTensor(sig, response.add_outputs());
  return response;
}

absl::StatusOr<inference::ModelConfig> KServeService::Config(const std::string& name,
                                                             const std::string& version) const {
  auto servable = Find(*repository_, name, version);
  if (!servable.ok()) return servable.status();
  return TritonConfig(**servable);
}

absl::StatusOr<inference::ModelStatisticsResponse> KServeService::Statistics(
    const std::string& name, const std::string& version) const {
  inference::ModelStatisticsResponse response;
  if (!name.empty()) {
    auto servable = Find(*repository_, name, version);
    if (!servable.ok()) return servable.status();
    Fill((*servable)->name(), (*servable)->version(), response.add_model_stats());
    return response;
  }
  for (const ModelState& state : repository_->List()) {
    for (int64_t v : state.versions) Fill(state.name, v, response.add_model_stats());
  }
  return response;
}

grpc::Status KServeService::ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) {
  response->set_live(Live());
  return grpc::Status::OK;
}

grpc::Status KServeService::ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) {
  response->set_ready(CheckReady().ok());
  return grpc::Status::OK;
}

grpc::Status KServeService::ModelReady(grpc::ServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  auto ready = ModelIsReady(request->name(), request->version());
  if (!ready.ok()) return ToGrpc(ready.status());
  response->set_ready(*ready);
  return grpc::Status::OK;
}

grpc::Status KServeService::ServerMetadata(grpc::ServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  *response = Metadata();
  return grpc::Status::OK;
}

grpc::Status KServeService::ModelMetadata(grpc::ServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  auto metadata = Metadata(request->name(), request->version());
  if (!metadata.ok()) return ToGrpc(metadata.status());
  *response = *std::move(metadata);
  return grpc::Status::OK;
}

struct KServeService::Call {
  InferExchange* exchange = nullptr;
  Finished finished;
  absl::Time start;
  // The version that runs: the one asked for, or the one a sequence started on (it keeps it).
  // Null until the model is found (no statistics are kept for an unknown model). Held until
  // the response is built, so that a version unloaded meanwhile still answers.
  std::shared_ptr<const Servable> ran_on;
  // Held until the response is built: the request's bytes and its place on the model.
  std::optional<limits::Admission> admission;
  std::optional<DecodedInfer> decoded;
  absl::Time decoded_at;
  absl::Duration input, infer, output;  // decoding, the run, encoding
  bool counted_here = false;            // InferTarget::count_request
};

void KServeService::Infer(const InferTarget& target, InferExchange* exchange, Finished finished) {
  auto call = std::make_unique<Call>();
  call->counted_here = target.count_request;
  call->exchange = exchange;
  call->finished = std::move(finished);
  call->start = absl::Now();
  auto servable = Find(*repository_, target.model, target.version);
  if (!servable.ok()) return Finish(std::move(call), servable.status());
  call->ran_on = *servable;
  const Servable& model = **servable;

  auto admission = limits::Admit(options_.limits, model, exchange->Caller(), target.request_bytes);
  if (!admission.ok()) return Finish(std::move(call), admission.status());
  call->admission = *std::move(admission);
  auto decoded = exchange->Decode(model);
  if (!decoded.ok()) return Finish(std::move(call), decoded.status());
  if (auto s = call->admission->AddBatch(decoded->batch); !s.ok()) {
    return Finish(std::move(call), s);
  }
  decoded->options.deadline = std::min(decoded->options.deadline, target.deadline);
  if (target.cancelled) decoded->options.cancelled = target.cancelled;
  call->decoded = *std::move(decoded);
  call->decoded_at = absl::Now();
  call->input = call->decoded_at - call->start;
  DecodedInfer& d = *call->decoded;

  if (!d.sequence.has_value()) {
    // The batch moves to the scheduler; the response needs none of it.
    engine::Batch batch = std::move(d.batch);
    RunOptions options = d.options;
    options.allocate_outputs = exchange->Allocate(model, d);
    model.RunAsync(std::move(batch), options,
                   [this, call = std::move(call)](
                       absl::StatusOr<std::vector<engine::Tensor>> outputs) mutable {
                     Complete(std::move(call), std::move(outputs));
                   });
    return;
  }
  if (options_.sequences == nullptr) {
    return Finish(std::move(call),
                  absl::UnimplementedError(absl::StrCat(
                      "model '", model.name(), "': sequence_id ", d.sequence->ToString(),
                      " given, but stateful sequences (sequence_start / sequence_end with "
                      "server-held state) are not served on the KServe endpoint yet; use "
                      "rnnserve.v1 StreamPredict, or send whole sequences without sequence_id")));
  }
  // The sequence is bound to who started it: its token's hash, or its peer.
  d.options.caller = exchange->Caller();
  if (options_.blocking == nullptr) return RunSequence(std::move(call));
  // A chunk waits for its sequence and runs the engine on this thread: not on gRPC's.
  options_.blocking->Post(
      [this, call = std::move(call)](bool) mutable { RunSequence(std::move(call)); });
}

void KServeService::RunSequence(std::unique_ptr<Call> call) {
  DecodedInfer& d = *call->decoded;
  const Servable& asked = *call->ran_on;
  absl::Status run = asked.streamable();
  if (run.ok() && (d.batch.inputs.empty() || d.batch.inputs[0].dim(0) != 1)) {
    run = absl::InvalidArgumentError(
        absl::StrCat("sequence ", d.sequence->ToString(),
                     ": a sequence request carries one sequence (batch 1)"));
  }
  std::vector<engine::Tensor> outputs;
  if (run.ok()) {
    // String ids share the numeric id space through a hash with the top bit set.
    const SequenceIdentity& seq = *d.sequence;
    const uint64_t id =
        seq.id != 0 ? seq.id : (std::hash<std::string>{}(seq.string_id) | (uint64_t{1} << 63));
    const core::Chunk chunk{
        .id = id,
        .start = seq.start,
        .end = seq.end,
        .caller = {.owner = d.options.caller, .client = limits::ShareKey(d.options.caller)},
        .servable = call->ran_on};
    run = core::RunChunk(*options_.sequences, chunk, std::move(d.batch), d.options, &outputs,
                         &call->ran_on);
  }
  if (run.ok()) {
    Complete(std::move(call), std::move(outputs));
  } else {
    Complete(std::move(call), run);
  }
}

void KServeService::Complete(std::unique_ptr<Call> call,
                             absl::StatusOr<std::vector<engine::Tensor>> outputs) {
  const absl::Time ran_at = absl::Now();
  call->infer = ran_at - call->decoded_at;
  if (!outputs.ok()) {
    LogRunFailure(call->ran_on->name(), call->ran_on->version(), outputs.status());
    return Finish(std::move(call), outputs.status());
  }
  call->exchange->Encode(*call->ran_on, *call->decoded, *outputs);
  call->output = absl::Now() - ran_at;
  Finish(std::move(call), absl::OkStatus());
}

void KServeService::Finish(std::unique_ptr<Call> call, absl::Status status) {
  // The request itself is counted by the metrics interceptor, as every front end's are.
  metrics::ModelMetrics* m = call->ran_on == nullptr
                                 ? nullptr
                                 : metrics_.Find(call->ran_on->name(), call->ran_on->version());
  if (m != nullptr && status.ok()) m->RecordPhases(call->input, call->infer, call->output);
  if (m != nullptr && call->counted_here) {
    m->RequestStarted();
    m->RequestFinished("ModelInfer", status.code(), absl::Now() - call->start);
  }
  // Released before the answer goes out, as a synchronous handler releases them on return.
  call->admission.reset();
  call->decoded.reset();
  Finished finished = std::move(call->finished);
  call.reset();
  finished(std::move(status));
}

namespace {

// ModelInfer's side of an inference request.
class GrpcExchange final : public InferExchange {
 public:
  GrpcExchange(const grpc::ServerContextBase& context, const inference::ModelInferRequest& request,
               inference::ModelInferResponse* response)
      : context_(context), request_(request), response_(response) {}
  absl::StatusOr<DecodedInfer> Decode(const Servable& model) override {
    return DecodeInfer(request_, model);
  }
  OutputAllocator Allocate(const Servable& model, const DecodedInfer& decoded) override {
    return AllocateInfer(model, decoded, response_);
  }
  void Encode(const Servable& ran_on, const DecodedInfer& decoded,
              const std::vector<engine::Tensor>& outputs) override {
    response_->set_model_name(ran_on.name());
    response_->set_model_version(std::to_string(ran_on.version()));
    response_->set_id(request_.id());
    EncodeInfer(ran_on, decoded, outputs, response_);
  }
  std::string Caller() const override { return limits::CallerIdentity(context_); }

 private:
  const grpc::ServerContextBase& context_;
  const inference::ModelInferRequest& request_;
  inference::ModelInferResponse* const response_;
};

InferTarget TargetOf(const grpc::ServerContextBase& context,
                     const inference::ModelInferRequest& request, bool streamed) {
  InferTarget target{.model = request.model_name(),
                     .version = request.model_version(),
                     .request_bytes = static_cast<int64_t>(request.ByteSizeLong()),
                     .count_request = streamed};
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    target.deadline = absl::FromChrono(context.deadline());
  }
  target.cancelled = [&context] { return context.IsCancelled(); };
  return target;
}

}  // namespace

absl::Status KServeService::InferAndWait(const grpc::ServerContextBase& context,
                                         const inference::ModelInferRequest& request,
                                         inference::ModelInferResponse* response) {
  std::promise<absl::Status> promise;
  std::future<absl::Status> answer = promise.get_future();
  GrpcExchange exchange(context, request, response);
  Infer(TargetOf(context, request, /*streamed=*/true), &exchange,
        [&promise](absl::Status s) { promise.set_value(s); });
  return answer.get();
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const inference::ModelInferRequest* request,
                                                    inference::ModelInferResponse* response) {
  const UnaryStart start(context);
  if (start.refused()) return start.reactor();
  grpc::ServerUnaryReactor* reactor = start.reactor();
  auto exchange = std::make_unique<GrpcExchange>(*context, *request, response);
  InferExchange* e = exchange.get();
  Infer(TargetOf(*context, *request, /*streamed=*/false), e,
        [reactor, exchange = std::move(exchange)](absl::Status s) mutable {
          exchange.reset();
          reactor->Finish(ToGrpc(s));
        });
  return reactor;
}

grpc::Status KServeService::ModelStreamInfer(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
        stream) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  auto opened = limits::OpenIn(options_.streams, context, limits::CallerIdentity(*context));
  if (!opened.ok()) return ToGrpc(opened.status());
  limits::StreamLimits::Ticket ticket = *std::move(opened);
  inference::ModelInferRequest request;
  while (stream->Read(&request)) {
    ticket.Busy(true);
    inference::ModelStreamInferResponse response;
    const absl::Status s = InferAndWait(*context, request, response.mutable_infer_response());
    if (!s.ok()) {
      response.clear_infer_response();
      response.mutable_infer_response()->set_model_name(request.model_name());
      response.mutable_infer_response()->set_model_version(request.model_version());
      response.mutable_infer_response()->set_id(request.id());
      response.set_error_message(
          absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message()));
    }
    // Idle while the answer waits for its client: one that does not read is closed.
    ticket.Busy(false);
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

grpc::Status KServeService::ModelConfig(grpc::ServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  auto config = Config(request->name(), request->version());
  if (!config.ok()) return ToGrpc(config.status());
  *response->mutable_config() = *std::move(config);
  return grpc::Status::OK;
}

grpc::Status KServeService::ModelStatistics(grpc::ServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  auto statistics = Statistics(request->name(), request->version());
  if (!statistics.ok()) return ToGrpc(statistics.status());
  *response = *std::move(statistics);
  return grpc::Status::OK;
}

void KServeService::Fill(const std::string& model, int64_t version,
                         inference::ModelStatistics* out) const {
  const metrics::ModelMetrics* m = metrics_.Find(model, version);
  FillStatistics(model, version, m != nullptr ? m->Statistics() : metrics::InferenceStatistics{},
                 out);
}

}  // namespace rnnserve::server::kserve
