#include "server/readiness.h"

#include "absl/strings/str_cat.h"

namespace rnnserve::server {

absl::Status Readiness::CheckReady() const {
  if (shut_down_.load()) return absl::UnavailableError("the server is shutting down");
  if (!repository_->loaded_all()) {
    return absl::UnavailableError("the initial model loads are running");
  }
  if (!options_.strict) return absl::OkStatus();
  for (const ModelState& model : repository_->List()) {
    if (model.all_loaded) continue;
    return absl::UnavailableError(absl::StrCat(
        "model '", model.name, "' is ",
        model.state == ModelAvailability::kReady ? "serving versions loaded before its newest files failed"
                               : "not loaded",
        ": ", model.reason, " (--strict-readiness=false: ready when some models failed)"));
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
