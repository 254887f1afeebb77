// StreamPredict of the rnnserve.v1 service: chunks of stateful sequences, with each sequence's
// recurrent states kept on the server between chunks (server/sequence_manager.h).

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/log.h"
#include "server/request_validation.h"
#include "server/services/rnnserve_service.h"
#include "server/stream_window.h"
#include "server/tensor_codec.h"

namespace rnnserve::server {
absl::Status RnnServeService::StreamChunk(const grpc::ServerContext& context,
                                          const v1::StreamPredictRequest& req,
                                          const SequenceManager::Caller& caller,
                                          v1::StreamPredictResponse* resp) {
  const std::string& name = req.model_spec().name();
  std::shared_ptr<const Servable> fresh;
  if (req.start()) {
    auto servable = repository_->Get(name, req.model_spec().version());
    if (!servable.ok()) return servable.status();
    if (!(*servable)->streamable().ok()) return (*servable)->streamable();
    fresh = *servable;
  }
  const SequenceManager::Limits limits =
      fresh ? SequenceLimitsOf(*fresh) : SequenceManager::Limits{};
  auto lease = sequences_->Acquire(name, req.sequence_id(), req.start(), fresh, limits, caller);
  if (!lease.ok()) return lease.status();
  const Servable& model = *lease->servable;
  auto admission = limits::Admit(limits_.requests, model, static_cast<int64_t>(req.ByteSizeLong()));
  if (!admission.ok()) {
    // Refused before it ran: the sequence is as it was (or, for a start, not begun).
    sequences_->Release(name, req.sequence_id(), std::move(lease->states), false, req.start());
    return admission.status();
  }

  v1::PredictRequest predict;
  *predict.mutable_inputs() = req.inputs();
  *predict.mutable_output_filter() = req.output_filter();
  absl::Status s = ValidateOutputFilter(predict, model);
  int64_t chunk_steps = 0;
  auto batch = s.ok() ? ValidateStreamChunk(predict, model, lease->steps, &chunk_steps)
                      : absl::StatusOr<engine::Batch>(s);
  if (batch.ok() && batch->inputs[0].dim(0) != 1) {
    batch = absl::InvalidArgumentError(
        absl::StrCat("stream chunks carry one sequence ([1, T, ...]); got a batch of ",
                     batch->inputs[0].dim(0)));
  }
  if (batch.ok()) {
    if (absl::Status a = admission->AddBatch(*batch); !a.ok()) batch = a;
  }
  if (!batch.ok()) {
    // A malformed chunk changes nothing: the sequence keeps its state for a corrected retry.
    sequences_->Release(name, req.sequence_id(), std::move(lease->states), false, false);
    return batch.status();
  }
  batch->initial_states = std::move(lease->states);
  batch->continues = !req.start();
  LayerStates final_states;
  batch->final_states = &final_states;
  const RunOptions options = RunOptionsFor(context);
  std::vector<engine::Tensor> outputs;
  s = model.Run(*std::move(batch), &outputs, options);
  sequences_->Release(name, req.sequence_id(), std::move(final_states), req.end(), !s.ok(),
                      chunk_steps);
  if (!s.ok()) return s;
  resp->mutable_model_spec()->set_name(model.name());
  resp->mutable_model_spec()->set_version(model.version());
  const auto& filter = req.output_filter();
  for (size_t i = 0; i < outputs.size() && i < model.outputs().size(); ++i) {
    const std::string& out = model.outputs()[i].name;
    if (!filter.empty() && std::find(filter.begin(), filter.end(), out) == filter.end()) continue;
    EncodeTensor(outputs[i], &(*resp->mutable_outputs())[out]);
  }
  return absl::OkStatus();
}

grpc::Status RnnServeService::StreamPredict(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::StreamPredictResponse, v1::StreamPredictRequest>* stream) {
  if (grpc::Status a = auth::Authorize(authorizer_, *context, auth::Access::kInference); !a.ok()) {
    return a;
  }
  // The sequences this stream starts belong to it (no other stream can send their chunks) and
  // end with it; the per-client quota counts them against the caller.
  static std::atomic<uint64_t> next_stream{1};
  const SequenceManager::Caller caller{
      .owner = absl::StrCat("stream-", next_stream.fetch_add(1, std::memory_order_relaxed)),
      .client = limits::CallerIdentity(*context)};
  // Closed for idleness, the stream's sequences end before its client sees CANCELLED.
  auto opened = limits::OpenIn(limits_.streams, context,
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
    const bool written = stream->Write(resp);
    ticket.Busy(false);
    if (!written) break;
  }
  sequences_->EndOwner(caller.owner);
  if (ticket.reaped()) {
    LogDebug(absl::StrCat(caller.owner, " closed: idle for --stream-idle-seconds"));
  }
  return grpc::Status::OK;
}

}  // namespace rnnserve::server
