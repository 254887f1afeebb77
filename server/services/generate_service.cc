// Generate of the rnnserve.v1 service: decodes the request into generation::GenerateParams,
// starts it on the process's Generator (server/generation/generator.h) and encodes each step's
// tokens and finishes as a GenerateResponse. The handler's thread waits for the steps; a client
// that cancels, or a stream that cannot be written, drops the generation before its next step.
// A Generate call is a stream for the stream limits (--max-streams, server/limits/
// stream_limits.h): one past the bound is RESOURCE_EXHAUSTED, and a client that stops reading
// (its writes block) is closed after --stream-idle-seconds like an idle StreamPredict stream.
// It also holds its bytes of the byte budget (--max-inflight-bytes, server/limits/
// byte_budget.h) until it ends, counted against its caller's fair share like every other
// RPC's: GenerateBytes.

#include <algorithm>

#include "server/generation/generator.h"
#include "server/grpc_status.h"
#include "server/limits/byte_budget.h"
#include "server/limits/caller_identity.h"
#include "server/limits/stream_limits.h"
#include "server/services/rnnserve_service.h"

namespace rnnserve::server {
namespace {

generation::GenerateParams Decode(const v1::GenerateRequest& r) {
  generation::GenerateParams p;
  p.prompt_ids.assign(r.prompt_ids().begin(), r.prompt_ids().end());
  if (!r.prompt_text().empty()) p.prompt_text = r.prompt_text();
  p.max_tokens = r.max_tokens();
  p.sampler = {.temperature = r.temperature(), .top_k = r.top_k(), .top_p = r.top_p()};
  p.seed = r.seed();
  p.stop_ids.assign(r.stop_ids().begin(), r.stop_ids().end());
  p.stop_strings.assign(r.stop_strings().begin(), r.stop_strings().end());
  p.n = r.n();
  return p;
}

v1::FinishReason Encode(generation::FinishReason reason) {
  switch (reason) {
    case generation::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case generation::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case generation::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

// What a Generate holds of the byte budget: the serialized request, and its prompt as token
// ids for each sample (8 bytes an id; a prompt's text is counted as one id a byte, its most).
int64_t GenerateBytes(const v1::GenerateRequest& r) {
  const int64_t prompt = r.prompt_ids_size() + static_cast<int64_t>(r.prompt_text().size());
  return static_cast<int64_t>(r.ByteSizeLong()) + 8 * prompt * std::max(1, r.n());
}

}  // namespace

grpc::Status RnnServeService::Generate(grpc::ServerContext* context,
                                       const v1::GenerateRequest* request,
                                       grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) return a;
  const std::string caller = limits::CallerIdentity(*context);
  auto opened = limits::OpenIn(limits_.streams, context, caller);
  if (!opened.ok()) return ToGrpc(opened.status());
  auto reserved = limits::ReserveIn(limits_.requests.bytes, caller, GenerateBytes(*request));
  if (!reserved.ok()) return ToGrpc(reserved.status());
  const limits::ByteBudget::Reservation bytes = *std::move(reserved);  // held until the end
  limits::StreamLimits::Ticket ticket = *std::move(opened);
  ticket.Busy(true);  // idle only while a write waits for the client
  auto servable = repository_->Get(request->model_spec().name(), request->model_spec().version());
  if (!servable.ok()) return ToGrpc(servable.status());
  const RunOptions options = RunOptionsFor(*context);
  auto started = generator_->Start(*servable, Decode(*request), options.deadline);
  if (!started.ok()) return ToGrpc(started.status());
  generation::Generation& g = **started;
  // How often a waiting handler asks whether its client went away.
  constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
  generation::StepEvent event;
  while (true) {
    const generation::Generation::Wait w = g.Next(&event, kCancelPoll);
    if (w == generation::Generation::Wait::kEnd) break;
    if (w == generation::Generation::Wait::kTimeout) {
      if (context->IsCancelled()) {
        g.Cancel();
        return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the generation");
      }
      continue;
    }
    // One message carries every step ready by now: a client that reads slower than the model
    // steps gets fewer, larger messages.
    v1::GenerateResponse response;
    response.mutable_model_spec()->set_name(g.model()->name());
    response.mutable_model_spec()->set_version(g.model()->version());
    bool ended = false;
    do {
      for (generation::Token& t : event.tokens) {
        v1::GeneratedToken* out = response.add_tokens();
        out->set_sample(t.sample);
        out->set_id(t.id);
        out->set_text(std::move(t.text));
      }
      for (const generation::Finish& f : event.finished) {
        v1::GenerateFinish* out = response.add_finished();
        out->set_sample(f.sample);
        out->set_reason(Encode(f.reason));
        out->set_tokens(f.tokens);
      }
      // Messages stay far below gRPC's default 4 MiB receive limit.
      constexpr int kMostTokensPerMessage = 4096;
      if (response.tokens_size() >= kMostTokensPerMessage) break;
      const generation::Generation::Wait more = g.Next(&event, absl::ZeroDuration());
      if (more != generation::Generation::Wait::kEvent) {
        ended = more == generation::Generation::Wait::kEnd;
        break;
      }
    } while (true);
    ticket.Busy(false);
    const bool written = writer->Write(response);
    ticket.Busy(true);
    if (!written) {
      g.Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          ticket.reaped() ? "the client stopped reading for --stream-idle-seconds"
                                          : "the client went away");
    }
    if (ended) break;
  }
  return ToGrpc(g.status());
}

}  // namespace rnnserve::server
