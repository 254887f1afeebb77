#pragma once

// gRPC health checking (grpc.health.v1.Health: Check and Watch) on the synchronous API.
//
// Why not grpc::EnableDefaultHealthCheckService: in gRPC 1.51 the default service is a
// callback service, and one callback service makes the server start a callback completion
// queue with a thread of its own. That thread then polls the listening sockets beside the
// synchronous server's threads, reads most requests, and hands each one to a synchronous
// thread: a wake-up and a context switch on every call (about a third of a tiny model's
// latency at concurrency 1). This service needs no such thread.
//
// Behaviour (as the protocol specifies):
//   - Statuses are kept per service name; "" is the whole server. Names not registered with
//     SetServingStatus are unknown: Check answers NOT_FOUND, Watch sends SERVICE_UNKNOWN.
//   - rnnserve's statuses: "" and each served service are its readiness (server/readiness.h);
//     options.liveness_service is its liveness: SERVING while the process answers, whatever
//     the models, through the drain (Kubernetes' livenessProbe names it, its readinessProbe
//     asks ""; a pod with a broken model is not ready and not restarted).
//   - Watch sends the current status at once, then each change (setting the status a service
//     already has is no change and sends nothing), until the client cancels,
//     the server shuts down, or Shutdown() is called.
//   - Shutdown(): every status but liveness becomes NOT_SERVING for good (later
//     SetServingStatus calls are ignored) and every Watch ends with OK, so a draining server
//     reports itself unhealthy and its Watch calls do not hold up grpc::Server::Shutdown. It
//     returns once every Watch handler has returned (at most 1 s: a client that stopped reading
//     cannot hold it), so call it before grpc::Server::Shutdown: no Watch is then in flight when
//     the server starts closing its connections.
// Watch holds one server thread per watcher while it waits (the synchronous API), and looks
// for a cancelled client every watch_poll_ms.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rnnserve::server {

struct HealthServiceOptions {
  // How often a waiting Watch asks whether its client went away; must be positive.
  int64_t watch_poll_ms = 1000;
  // Registered SERVING at creation and left so: SetServingStatus(bool) and Shutdown() do not
  // change it. Empty: none.
  std::string liveness_service = "liveness";
};

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // "" starts NOT_SERVING. INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<HealthService>> Create(
      const HealthServiceOptions& options = {});

  // Registers `service` (or changes its status) and wakes its watchers if that changed it.
  void SetServingStatus(const std::string& service, bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  // Every registered service, "" included, but the liveness service.
  void SetServingStatus(bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit HealthService(const HealthServiceOptions& options);
  Status StatusOf(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HealthServiceOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Status> statuses_ ABSL_GUARDED_BY(mu_);
  // Bumped on every change a Watch must send (a status set, Shutdown).
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;  // Watch calls running
};

}  // namespace rnnserve::server
