#include "server/services/health_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rnnserve::server {
namespace {

// How long Shutdown() waits for Watch calls to send their last status and return.
constexpr absl::Duration kShutdownWait = absl::Seconds(1);

}  // namespace

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

absl::StatusOr<std::unique_ptr<HealthService>> HealthService::Create(
    const HealthServiceOptions& options) {
  if (options.watch_poll_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "health service: watch_poll_ms must be positive; was ", options.watch_poll_ms));
  }
  return std::unique_ptr<HealthService>(new HealthService(options));
}

HealthService::HealthService(const HealthServiceOptions& options) : options_(options) {
  absl::MutexLock lock(&mu_);
  statuses_[""] = HealthCheckResponse::NOT_SERVING;
  if (!options_.liveness_service.empty()) {
    statuses_[options_.liveness_service] = HealthCheckResponse::SERVING;
  }
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  const Status next = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  auto [it, added] = statuses_.try_emplace(service, next);
  if (!added && it->second == next) return;
  it->second = next;
  ++version_;
}

void HealthService::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  const Status next = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  bool changed = false;
  for (auto& [name, status] : statuses_) {
    if (name == options_.liveness_service) continue;
    changed |= status != next;
    status = next;
  }
  if (changed) ++version_;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, status] : statuses_) {
    if (name != options_.liveness_service) status = HealthCheckResponse::NOT_SERVING;
  }
  shut_down_ = true;
  ++version_;
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watchers_ == 0; };
  mu_.AwaitWithTimeout(absl::Condition(&ended), kShutdownWait);
}

HealthService::Status HealthService::StatusOf(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  const Status status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("service '", request->service(), "' is not known to the health service"));
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  const absl::Duration poll = absl::Milliseconds(options_.watch_poll_ms);
  {
    absl::MutexLock lock(&mu_);
    ++watchers_;
  }
  struct Leave {
    HealthService* self;
    ~Leave() {
      absl::MutexLock lock(&self->mu_);
      --self->watchers_;
    }
  } leave{this};
  uint64_t sent = 0;  // version_ when the last status was sent
  for (bool first = true;; first = false) {
    Status status;
    bool changed;
    bool shut_down;
    {
      absl::MutexLock lock(&mu_);
      if (!first) {
        auto newer = [this, &sent]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != sent; };
        mu_.AwaitWithTimeout(absl::Condition(&newer), poll);
      }
      changed = first || version_ != sent;
      sent = version_;
      status = StatusOf(request->service());
      shut_down = shut_down_;
    }
    if (changed) {
      HealthCheckResponse response;
      response.set_status(status);
      if (!writer->Write(response)) return grpc::Status::OK;  // the client went away
    } else if (context->IsCancelled()) {
      return grpc::Status::OK;
    }
    if (shut_down) return grpc::Status::OK;  // NOT_SERVING was the last word
  }
}

}  // namespace rnnserve::server
