// The model repository extension of KServeService (kserve_service.h): the index, load and
// unload, for gRPC here and for HTTP through rest_routes.cc.

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "server/services/kserve/kserve_service.h"

namespace rnnserve::server::kserve {
namespace {

// Triton's parameters (a config override, model files) are not taken: the repository's files
// are what is served.
// unload_dependents is taken (nothing depends on another model here).
template <typename Request>
absl::Status NoParameters(const Request& request) {
  for (const auto& [name, value] : request.parameters()) {
    if (name == "unload_dependents") continue;
    return ParameterRefused(request.model_name(), name);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParameterRefused(const std::string& model, const std::string& parameter) {
  return absl::InvalidArgumentError(absl::StrCat(
      "model '", model, "': parameter '", parameter,
      "' is not supported; models load from the repository's files and config.pbtxt only"));
}

inference::RepositoryIndexResponse KServeService::Index(bool ready_only) const {
  inference::RepositoryIndexResponse response;
  for (const ModelState& state : repository_->List()) {
    if (state.versions.empty()) {
      if (ready_only) continue;
      auto* m = response.add_models();
      m->set_name(state.name);
      m->set_state(ModelAvailabilityName(state.state));
      m->set_reason(state.reason);
      continue;
    }
    for (int64_t v : state.versions) {
      auto* m = response.add_models();
      m->set_name(state.name);
      m->set_version(std::to_string(v));
      m->set_state("READY");
    }
  }
  return response;
}

absl::Status KServeService::Load(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("model name: must not be empty");
  return repository_->Load(name).status();
}

absl::Status KServeService::Unload(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("model name: must not be empty");
  return repository_->Unload(name);
}

grpc::Status KServeService::RepositoryIndex(grpc::ServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  *response = Index(request->ready());
  return grpc::Status::OK;
}

grpc::Status KServeService::RepositoryModelLoad(
    grpc::ServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  if (absl::Status p = NoParameters(*request); !p.ok()) return ToGrpc(p);
  return ToGrpc(Load(request->model_name()));
}

grpc::Status KServeService::RepositoryModelUnload(
    grpc::ServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  if (absl::Status p = NoParameters(*request); !p.ok()) return ToGrpc(p);
  return ToGrpc(Unload(request->model_name()));
}

}  // namespace rnnserve::server::kserve
