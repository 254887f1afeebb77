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
    MethodAccess{"/grpc.health.v1.Health/Check", Access::kPublic},
    MethodAccess{"/grpc.health.v1.Health/Watch", Access::kPublic},
    // gRPC's own reflection service (--reflection) has no handler of ours to refuse a call:
    // it describes the schema only, to anyone who reaches the port.
    MethodAccess{"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                 Access::kPublic},
};

// The verdicts of the calls in flight, by their context. Enforcing once an interceptor with
// tokens exists.
struct Verdicts {
  std::atomic<bool> enforcing{false};
  absl::Mutex mu;
  absl::flat_hash_map<const grpc::ServerContextBase*, grpc::Status> by_call ABSL_GUARDED_BY(mu);
};

Verdicts& TheVerdicts() {
  static Verdicts* const verdicts = new Verdicts();  // never destroyed: calls may outlive main
  return *verdicts;
}

class AccessInterceptor final : public grpc::experimental::Interceptor {
 public:
  AccessInterceptor(const TokenAuthorizer* authorizer, std::optional<Access> access,
                    const grpc::ServerContextBase* context)
      : authorizer_(authorizer), access_(access), context_(context) {}

  ~AccessInterceptor() override {
    Verdicts& v = TheVerdicts();
    absl::MutexLock lock(&v.mu);
    v.by_call.erase(context_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      grpc::Status verdict(grpc::StatusCode::PERMISSION_DENIED,
                           "this method is not open to callers");
      if (access_.has_value()) {
        std::string_view header;
        if (const auto* metadata = methods->GetRecvInitialMetadata(); metadata != nullptr) {
          const auto it = metadata->find("authorization");
          if (it != metadata->end()) header = std::string_view(it->second.data(), it->second.size());
        }
        verdict = authorizer_->Check(header, *access_);
      }
      Verdicts& v = TheVerdicts();
      absl::MutexLock lock(&v.mu);
      v.by_call[context_] = std::move(verdict);
    }
    methods->Proceed();
  }

 private:
  const TokenAuthorizer* const authorizer_;
  const std::optional<Access> access_;
  const grpc::ServerContextBase* const context_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(const TokenAuthorizer* authorizer) : authorizer_(authorizer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string_view method = info->method() != nullptr ? info->method() : "";
    return new AccessInterceptor(authorizer_, AccessOf(method), info->server_context());
  }

 private:
  const TokenAuthorizer* const authorizer_;
};

}  // namespace

std::optional<Access> AccessOf(std::string_view full_method) {
  for (const MethodAccess& m : kAccessTable) {
    if (m.method == full_method) return m.access;
  }
  return std::nullopt;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAccessInterceptor(
    const TokenAuthorizer* authorizer) {
  if (authorizer == nullptr || !authorizer->enabled()) return nullptr;
  TheVerdicts().enforcing.store(true);
  return std::make_unique<Factory>(authorizer);
}

grpc::Status Verdict(const grpc::ServerContextBase& context) {
  Verdicts& v = TheVerdicts();
  if (!v.enforcing.load(std::memory_order_relaxed)) return grpc::Status::OK;
  absl::MutexLock lock(&v.mu);
  const auto it = v.by_call.find(&context);
  if (it == v.by_call.end()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "this method is not open to callers");
  }
  return it->second;
}

}  // namespace rnnserve::server::auth
