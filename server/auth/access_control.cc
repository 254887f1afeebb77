#include "server/auth/access_control.h"

#include <array>
#include <atomic>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace rnnserve::server::auth {
namespace {

using grpc::experimental::InterceptionHookPoints;

struct MethodAccess {
  std::string_view method;
  Access access;
};

// The table. Probes are open; what changes the served set of models is admin's; everything
// else (inference, metadata, listing, statistics) is inference's.
constexpr std::array kAccessTable = {
    MethodAccess{"/rnnserve.v1.RnnServe/Predict", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/Evaluate", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/EvaluateStream", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/StreamPredict", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/Generate", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/ModelMetadata", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/ListModels", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/ServerMetadata", Access::kInference},
    MethodAccess{"/rnnserve.v1.RnnServe/LoadModel", Access::kAdmin},
    MethodAccess{"/rnnserve.v1.RnnServe/UnloadModel", Access::kAdmin},
    MethodAccess{"/inference.GRPCInferenceService/ServerLive", Access::kPublic},
    MethodAccess{"/inference.GRPCInferenceService/ServerReady", Access::kPublic},
    MethodAccess{"/inference.GRPCInferenceService/ModelReady", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ServerMetadata", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ModelMetadata", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ModelInfer", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ModelStreamInfer", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ModelConfig", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/ModelStatistics", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/RepositoryIndex", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/RepositoryModelLoad", Access::kAdmin},
    MethodAccess{"/inference.GRPCInferenceService/RepositoryModelUnload", Access::kAdmin},
    MethodAccess{"/inference.GRPCInferenceService/SystemSharedMemoryStatus", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/SystemSharedMemoryRegister", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/SystemSharedMemoryUnregister",
                 Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/CudaSharedMemoryStatus", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/CudaSharedMemoryRegister", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/CudaSharedMemoryUnregister", Access::kInference},
    MethodAccess{"/inference.GRPCInferenceService/TraceSetting", Access::kAdmin},
    MethodAccess{"/inference.GRPCInferenceService/LogSettings", Access::kAdmin},
    MethodAccess{"/tensorflow.serving.PredictionService/Predict", Access::kInference},
    MethodAccess{"/tensorflow.serving.PredictionService/GetModelMetadata", Access::kInference},
    MethodAccess{"/tensorflow.serving.PredictionService/Classify", Access::kInference},
    MethodAccess{"/tensorflow.serving.PredictionService/Regress", Access::kInference},
    MethodAccess{"/tensorflow.serving.PredictionService/MultiInference", Access::kInference},
    MethodAccess{"/tensorflow.serving.ModelService/GetModelStatus", Access::kInference},
    // TF Serving's way to change the served models (answered UNIMPLEMENTED: LoadModel is ours).
    MethodAccess{"/tensorflow.serving.ModelService/HandleReloadConfigRequest", Access::kAdmin},
    MethodAccess{"/grpc.health.v1.Health/Check", Access::kPublic},
    MethodAccess{"/grpc.health.v1.Health/Watch", Access::kPublic},
    // gRPC's own reflection service (--reflection) has no handler of ours to refuse a call:
    // it describes the schema only, to anyone who reaches the port.
    MethodAccess{"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", Access::kPublic},
};

// The verdicts of the calls in flight, by their context. Enforcing once an interceptor with
// tokens exists; without, only model control calls have a verdict (`recorded` counts them).
struct Verdicts {
  std::atomic<bool> enforcing{false};
  std::atomic<int> recorded{0};
  absl::Mutex mu;
  absl::flat_hash_map<const grpc::ServerContextBase*, grpc::Status> by_call ABSL_GUARDED_BY(mu);
};

Verdicts& TheVerdicts() {
  static Verdicts* const verdicts = new Verdicts();  // never destroyed: calls may outlive main
  return *verdicts;
}

class AccessInterceptor final : public grpc::experimental::Interceptor {
 public:
  AccessInterceptor(const AccessOptions& options, std::optional<Access> access,
                    grpc::ServerContextBase* context)
      : options_(options), access_(access), context_(context) {}

  ~AccessInterceptor() override {
    Verdicts& v = TheVerdicts();
    absl::MutexLock lock(&v.mu);
    if (v.by_call.erase(context_) > 0) v.recorded.fetch_sub(1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      grpc::Status verdict(grpc::StatusCode::PERMISSION_DENIED,
                           "this method is not open to callers");
      if (access_.has_value()) {
        std::string_view header;
        if (const auto* metadata = methods->GetRecvInitialMetadata(); metadata != nullptr) {
          const auto it = metadata->find("authorization");
          if (it != metadata->end())
            header = std::string_view(it->second.data(), it->second.size());
        }
        verdict = options_.authorizer != nullptr ? options_.authorizer->Check(header, *access_)
                                                 : grpc::Status::OK;
        if (verdict.ok() && *access_ == Access::kAdmin) {
          verdict = CheckModelControl(options_, context_->peer());
        }
      }
      Verdicts& v = TheVerdicts();
      absl::MutexLock lock(&v.mu);
      if (v.by_call.insert_or_assign(context_, std::move(verdict)).second) v.recorded.fetch_add(1);
    }
    methods->Proceed();
  }

 private:
  const AccessOptions options_;
  const std::optional<Access> access_;
  grpc::ServerContextBase* const context_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(const AccessOptions& options)
      : options_(options),
        tokens_(options.authorizer != nullptr && options.authorizer->enabled()) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string_view method = info->method() != nullptr ? info->method() : "";
    const std::optional<Access> access = AccessOf(method);
    // Without tokens only model control has anything to check.
    if (!tokens_ && access != Access::kAdmin) return nullptr;
    return new AccessInterceptor(options_, access, info->server_context());
  }

 private:
  const AccessOptions options_;
  const bool tokens_;
};

}  // namespace

std::optional<Access> AccessOf(std::string_view full_method) {
  for (const MethodAccess& m : kAccessTable) {
    if (m.method == full_method) return m.access;
  }
  return std::nullopt;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAccessInterceptor(
    const AccessOptions& options) {
  if (options.authorizer != nullptr && options.authorizer->enabled()) {
    TheVerdicts().enforcing.store(true);
  }
  return std::make_unique<Factory>(options);
}

bool IsLocalPeer(std::string_view peer) {
  for (std::string_view prefix : {"unix:", "unix-abstract:", "ipv4:127.", "ipv6:[::1]",
                                  "ipv6:%5B::1%5D", "ipv6:[::ffff:127."}) {
    if (peer.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

grpc::Status CheckModelControl(const AccessOptions& options, std::string_view peer) {
  const bool admin_tokens = options.authorizer != nullptr && options.authorizer->has_admin_tokens();
  if (admin_tokens || options.remote_model_control || IsLocalPeer(peer)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "loading and unloading models is open to local callers only: configure "
                      "--admin-token-file (then an admin token is needed), or pass "
                      "--allow-remote-model-control");
}

grpc::Status Verdict(const grpc::ServerContextBase& context) {
  Verdicts& v = TheVerdicts();
  const bool enforcing = v.enforcing.load(std::memory_order_relaxed);
  if (!enforcing && v.recorded.load(std::memory_order_acquire) == 0) return grpc::Status::OK;
  absl::MutexLock lock(&v.mu);
  const auto it = v.by_call.find(&context);
  if (it != v.by_call.end()) return it->second;
  if (!enforcing) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "this method is not open to callers");
}

}  // namespace rnnserve::server::auth
