// StreamPredict of the rnnserve.v1 service: chunks of stateful sequences, with each sequence's
// recurrent states kept on the server between chunks (server/core/sequence_runner.h).

#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/sequence_runner.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/log.h"
#include "server/services/rnnserve_service.h"
#include "server/stream_window.h"
#include "server/tensor_codec.h"

namespace rnnserve::server {
absl::Status RnnServeService::StreamChunk(const grpc::ServerContext& context,
                                          const v1::StreamPredictRequest& req,
                                          const core::StateStore::Caller& caller,
                                          v1::StreamPredictResponse* resp) {
  // Admit: the model, the limits and the one validation (core/sequence_runner.h).
  auto servable = repository_->Get(req.model_spec().name(), req.model_spec().version());
  if (!servable.ok()) return servable.status();
  const Servable& model = **servable;
  if (!model.streamable().ok()) return model.streamable();
  auto admission = limits::Admit(limits_.requests, model, caller.client,
                                 static_cast<int64_t>(req.ByteSizeLong()));
  if (!admission.ok()) return admission.status();
  const core::Request request{
      .inputs = ViewsOf(req.inputs()),
      .output_filter = {req.output_filter().begin(), req.output_filter().end()}};
  if (auto s = core::ValidateOutputFilter(request, model.signature()); !s.ok()) return s;
  auto batch = ValidateStreamChunk(request, model);
  if (!batch.ok()) return batch.status();
  if (batch->inputs[0].dim(0) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream chunks carry one sequence ([1, T, ...]); got a batch of ",
                     batch->inputs[0].dim(0)));
  }
  if (absl::Status a = admission->AddBatch(*batch); !a.ok()) return a;
  // Own, run, release.
  std::shared_ptr<const Servable> ran_on;
  std::vector<engine::Tensor> outputs;
  const absl::Status s =
      core::RunChunk(*sequences_,
                     {.id = req.sequence_id(),
                      .start = req.start(),
                      .end = req.end(),
                      .caller = caller,
                      .servable = *servable},
                     *std::move(batch), RunOptionsFor(context), &outputs, &ran_on);
  if (!s.ok()) return s;
  resp->mutable_model_spec()->set_name(ran_on->name());
  resp->mutable_model_spec()->set_version(ran_on->version());
  EncodeOutputs(*ran_on, req.output_filter(), outputs, resp->mutable_outputs());
  return absl::OkStatus();
}

grpc::Status RnnServeService::StreamPredict(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::StreamPredictResponse, v1::StreamPredictRequest>* stream) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  // The sequences this stream starts belong to it (no other stream can send their chunks) and
  // end with it; the per-client quota counts them against the caller. The owner names this
  // process too (a random tag): a shared store sees the streams of every replica.
  static std::atomic<uint64_t> next_stream{1};
  static const std::string process_tag =
      absl::StrCat(absl::Hex(std::random_device{}(), absl::kZeroPad8),
                   absl::Hex(std::random_device{}(), absl::kZeroPad8));
  const core::StateStore::Caller caller{
      .owner = absl::StrCat("stream-", process_tag, "-",
                            next_stream.fetch_add(1, std::memory_order_relaxed)),
      .client = limits::ShareKey(limits::CallerIdentity(*context))};
  // Closed for idleness, the stream's sequences end before its client sees CANCELLED.
  auto opened = limits::OpenIn(limits_.streams, context, caller.client,
                               [this, owner = caller.owner] { sequences_->EndOwner(owner); });
  if (!opened.ok()) return ToGrpc(opened.status());
  limits::StreamLimits::Ticket ticket = *std::move(opened);
  v1::StreamPredictRequest req;
  while (stream->Read(&req)) {
    ticket.Busy(true);
    v1::StreamPredictResponse resp;
    resp.set_sequence_id(req.sequence_id());
    if (const absl::Status s = StreamChunk(*context, req, caller, &resp); !s.ok()) {
      resp.Clear();
      resp.set_sequence_id(req.sequence_id());
      resp.set_error_code(static_cast<int>(s.code()));
      resp.set_error_message(std::string(s.message()));
    }
    // Idle while the answer waits for its client: one that does not read is closed.
    ticket.Busy(false);
    if (!stream->Write(resp)) break;
  }
  sequences_->EndOwner(caller.owner);
  if (ticket.reaped()) {
    LogDebug(absl::StrCat(caller.owner, " closed: idle for --stream-idle-seconds"));
  }
  return grpc::Status::OK;
}

}  // namespace rnnserve::server
