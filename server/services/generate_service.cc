// Generate of the rnnserve.v1 service, on gRPC's callback API: decodes the request into
// generation::GenerateParams, starts it on the process's Generator (server/generation/
// generator.h) and encodes its steps' tokens and finishes as GenerateResponses. No thread
// waits for a generation: each event the generation queues posts the call's reactor to the
// completion threads (RnnServeLimits::completions; one post at a time per call, so the thread
// that steps the generations never writes to a socket), and the reactor writes every event
// ready by then as one message (a client that reads slower than the model
// steps gets fewer, larger messages) and finishes with the generation's status once its events
// are written. A client that cancels, or a stream that cannot be written, drops the generation
// before its next step.
// A Generate call counts against --max-generations (server/limits/stream_limits.h, an
// instance of its own: it holds no server thread, so it is not in --max-streams): one past the
// bound is RESOURCE_EXHAUSTED, and a client that stops reading (a write waits) is closed after
// --stream-idle-seconds like an idle StreamPredict stream. It also holds its bytes of the
// byte budget (--max-inflight-bytes, server/limits/byte_budget.h) until it is done, counted
// against its caller's fair share like every other RPC's: GenerateBytes.

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
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

class GenerateReactor;

// The generation's way to its reactor, cut when the reactor is done (the generation may run on
// for a step after its call ended).
struct ReactorLink {
  explicit ReactorLink(batching::AsyncRunner* runner) : runner(runner) {}
  batching::AsyncRunner* const runner;  // null: Notify on the generation's thread
  std::atomic<bool> posted{false};      // a Notify is queued on `runner`
  absl::Mutex mu;
  GenerateReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  // The generation queued an event or ended: the reactor pumps, on the runner.
  static void Post(const std::shared_ptr<ReactorLink>& link) {
    if (link->runner == nullptr) return link->Notify();
    if (link->posted.exchange(true)) return;  // the queued one will see this event too
    link->runner->Post([link](bool run) {
      link->posted.store(false);
      if (run) link->Notify();
    });
  }
  void Notify();
  void Detach() {
    absl::MutexLock lock(&mu);
    reactor = nullptr;
  }
};

// What a Generate holds of the byte budget: the serialized request, and its prompt as token
// ids for each sample (8 bytes an id; a prompt's text is counted as one id a byte, its most).
int64_t GenerateBytes(const v1::GenerateRequest& r) {
  const int64_t prompt = r.prompt_ids_size() + static_cast<int64_t>(r.prompt_text().size());
  return static_cast<int64_t>(r.ByteSizeLong()) + 8 * prompt * std::max(1, r.n());
}

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit GenerateReactor(std::shared_ptr<ReactorLink> link) : link_(std::move(link)) {}

  // Everything that can refuse the call, then the generation's start; finishes on a refusal.
  void Start(grpc::CallbackServerContext* context, const v1::GenerateRequest& request,
             ModelRepository* repository, limits::StreamLimits* generations,
             limits::ByteBudget* bytes, generation::Generator* generator) {
    if (grpc::Status a = auth::Verdict(*context); !a.ok()) return Refuse(a);
    const std::string caller = limits::CallerIdentity(*context);
    auto opened = limits::OpenIn(generations, context, caller);
    if (!opened.ok()) return Refuse(ToGrpc(opened.status()));
    auto reserved = limits::ReserveIn(bytes, caller, GenerateBytes(request));
    if (!reserved.ok()) return Refuse(ToGrpc(reserved.status()));
    ticket_ = *std::move(opened);
    bytes_ = *std::move(reserved);
    ticket_.Busy(true);  // idle only while a write waits for the client
    auto servable = repository->Get(request.model_spec().name(), request.model_spec().version());
    if (!servable.ok()) return Refuse(ToGrpc(servable.status()));
    {
      absl::MutexLock lock(&link_->mu);
      link_->reactor = this;
    }
    auto started = generator->Start(*servable, Decode(request), RunOptionsFor(*context).deadline,
                                    [link = link_] { ReactorLink::Post(link); });
    if (!started.ok()) return Refuse(ToGrpc(started.status()));
    {
      absl::MutexLock lock(&mu_);
      g_ = *std::move(started);
    }
    Pump();  // events that came before g_ was set
  }

  // Writes the events ready now, or finishes once the generation has ended and every event is
  // written. Nothing while a write is in flight (its OnWriteDone pumps again).
  void Pump() {
    bool write = false, finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (g_ == nullptr || writing_ || finished_) return;
      response_.Clear();
      generation::StepEvent event;
      generation::Generation::Wait w = generation::Generation::Wait::kTimeout;
      // Messages stay far below gRPC's default 4 MiB receive limit.
      constexpr int kMostTokensPerMessage = 4096;
      while (response_.tokens_size() < kMostTokensPerMessage &&
             (w = g_->Next(&event, absl::ZeroDuration())) == generation::Generation::Wait::kEvent) {
        for (generation::Token& t : event.tokens) {
          v1::GeneratedToken* out = response_.add_tokens();
          out->set_sample(t.sample);
          out->set_id(t.id);
          out->set_text(std::move(t.text));
        }
        for (const generation::Finish& f : event.finished) {
          v1::GenerateFinish* out = response_.add_finished();
          out->set_sample(f.sample);
          out->set_reason(Encode(f.reason));
          out->set_tokens(f.tokens);
        }
      }
      if (response_.tokens_size() > 0 || response_.finished_size() > 0) {
        response_.mutable_model_spec()->set_name(g_->model()->name());
        response_.mutable_model_spec()->set_version(g_->model()->version());
        writing_ = write = true;
      } else if (w == generation::Generation::Wait::kEnd) {
        finished_ = finish = true;
        status = ToGrpc(g_->status());
      }
    }
    if (write) {
      ticket_.Busy(false);
      StartWrite(&response_);
    } else if (finish) {
      Finish(status);
    }
  }

  void OnWriteDone(bool ok) override {
    ticket_.Busy(true);
    if (!ok) {
      const bool reaped = ticket_.reaped();
      {
        absl::MutexLock lock(&mu_);
        writing_ = false;
        if (finished_) return;
        finished_ = true;
        g_->Cancel();
      }
      return Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                 reaped ? "the client stopped reading for --stream-idle-seconds"
                                        : "the client went away"));
    }
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    Pump();
  }

  // The client went away (or the stream was closed for idleness): the generation ends before
  // its next step, and its end finishes the call.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (g_ != nullptr) g_->Cancel();
  }

  void OnDone() override {
    link_->Detach();
    {
      absl::MutexLock lock(&mu_);
      if (g_ != nullptr) g_->Cancel();  // nothing when it ended
    }
    delete this;
  }

 private:
  void Refuse(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(status);
  }

  const std::shared_ptr<ReactorLink> link_;
  limits::StreamLimits::Ticket ticket_;    // set in Start, before any other thread sees this
  limits::ByteBudget::Reservation bytes_;  // likewise; held until OnDone
  absl::Mutex mu_;
  std::shared_ptr<generation::Generation> g_ ABSL_GUARDED_BY(mu_);
  // The message being written: untouched from StartWrite until OnWriteDone.
  v1::GenerateResponse response_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called
};

void ReactorLink::Notify() {
  absl::MutexLock lock(&mu);
  if (reactor != nullptr) reactor->Pump();
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* RnnServeService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  auto* reactor = new GenerateReactor(std::make_shared<ReactorLink>(limits_.completions));
  reactor->Start(context, *request, repository_, limits_.generations, limits_.requests.bytes,
                 generator_.get());
  return reactor;
}

}  // namespace rnnserve::server
