#include "server/services/unparsed_request.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rnnserve::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UnparsedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit UnparsedRequestInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // gRPC hands the hook no message when the bytes did not parse as the request type.
      (methods->GetRecvMessage() == nullptr ? unparsed_ : parsed_) = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) && unparsed_ &&
        !parsed_) {
      const grpc::Status status = methods->GetSendStatus();
      // The callback API answers UNIMPLEMENTED, the synchronous one INTERNAL; both say nothing.
      if ((status.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
           status.error_code() == grpc::StatusCode::INTERNAL) &&
          status.error_message().empty()) {
        methods->ModifySendStatus(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         absl::StrCat("the request is not a valid protobuf message of ", method_,
                                      "'s request type: its bytes did not parse; nothing ran")));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  // Hooks of one call run one at a time; these need no lock.
  bool unparsed_ = false;
  bool parsed_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const absl::string_view method = info->method() != nullptr ? info->method() : "";
    return new UnparsedRequestInterceptor(std::string(method));
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewUnparsedRequestInterceptor() {
  return std::make_unique<Factory>();
}

}  // namespace rnnserve::server
