#pragma once

// Whether the server is live and ready: the one answer every front end gives (gRPC health,
// KServe ServerLive and ServerReady, and the HTTP health endpoints when they come), so that no
// two probes of one server disagree.
//
//   - Live: the process runs and answers; true until it exits (a server that is draining or
//     has a broken model is still live: restarting it would fix nothing).
//   - Ready, strict (the default, Triton's --strict-readiness): the initial loads are done and
//     every model of the repository has every version its policy selects loaded
//     (ModelState::all_loaded). A model that failed to load, or whose newest files failed to
//     reload, makes the server not ready; one that is unloaded or whose directory is removed
//     no longer counts. An empty repository is ready.
//   - Ready, not strict: the initial loads are done, whatever failed.
//   - After Shutdown() (SIGTERM: the drain), never ready.
// The state is read at each call; ModelRepository::Subscribe tells when it may have changed.

#include <atomic>

#include "absl/status/status.h"
#include "server/model_repository.h"

namespace rnnserve::server {

struct ReadinessOptions {
  // true: ready only when every model asked for is loaded; false: ready once every model has
  // been tried (--strict-readiness).
  bool strict = true;
};

class Readiness {
 public:
  // `repository` is not owned and must outlive this.
  Readiness(const ModelRepository* repository, ReadinessOptions options)
      : repository_(repository), options_(options) {}

  bool Live() const { return true; }
  // OK when ready; otherwise UNAVAILABLE saying why ("the initial model loads are running",
  // "model 'x' is not loaded: <reason>", "the server is shutting down").
  absl::Status CheckReady() const;
  bool Ready() const { return CheckReady().ok(); }
  // Not ready from now on (the drain before the server stops).
  void Shutdown() { shut_down_.store(true); }

 private:
  const ModelRepository* const repository_;
  const ReadinessOptions options_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace rnnserve::server
