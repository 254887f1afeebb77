#include "server/metrics/grpc_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"

namespace rnnserve::server::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;

// The model a request names, read by reflection so every service's messages work.
bool ModelOf(const google::protobuf::Message& msg, std::string* name, int64_t* version) {
  const google::protobuf::Descriptor* d = msg.GetDescriptor();
  const google::protobuf::Reflection* r = msg.GetReflection();
  if (const auto* spec = d->FindFieldByName("model_spec");
      spec != nullptr && spec->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
    const google::protobuf::Message& s = r->GetMessage(msg, spec);
    const auto* n = s.GetDescriptor()->FindFieldByName("name");
    const auto* v = s.GetDescriptor()->FindFieldByName("version");
    if (n == nullptr || n->type() != google::protobuf::FieldDescriptor::TYPE_STRING) return false;
    *name = s.GetReflection()->GetString(s, n);
    *version = 0;
    if (v != nullptr && v->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
      *version = s.GetReflection()->GetInt64(s, v);
    } else if (v != nullptr && v->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
               s.GetReflection()->HasField(s, v)) {
      // TF Serving's google.protobuf.Int64Value.
      const google::protobuf::Message& w = s.GetReflection()->GetMessage(s, v);
      const auto* value = w.GetDescriptor()->FindFieldByName("value");
      if (value != nullptr &&
          value->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
        *version = w.GetReflection()->GetInt64(w, value);
      }
    }
    return true;
  }
  const auto* n = d->FindFieldByName("model_name");  // KServe v2
  if (n == nullptr || n->type() != google::protobuf::FieldDescriptor::TYPE_STRING) return false;
  *name = r->GetString(msg, n);
  *version = 0;
  if (const auto* v = d->FindFieldByName("model_version");
      v != nullptr && v->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
    const std::string text = r->GetString(msg, v);
    if (!text.empty() && !absl::SimpleAtoi(text, version)) *version = -1;  // never loaded
  }
  return true;
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(ServerMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(absl::Now()) {}

  ~MetricsInterceptor() override {
    // A call torn down without a status (the client went away) still leaves the gauge.
    if (!finished_) Finish(absl::StatusCode::kCancelled);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        model_ == nullptr && methods->GetRecvMessage() != nullptr) {
      // Generated request types derive from Message alone, so the address is the Message's.
      const auto* msg = static_cast<const google::protobuf::Message*>(methods->GetRecvMessage());
      std::string name;
      int64_t version = 0;
      if (ModelOf(*msg, &name, &version) && version >= 0) {
        model_ = metrics_->Find(name, version);
        if (model_ != nullptr) model_->RequestStarted();
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !finished_) {
      Finish(static_cast<absl::StatusCode>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  void Finish(absl::StatusCode code) {
    finished_ = true;
    const absl::Duration d = absl::Now() - start_;
    if (model_ != nullptr) {
      model_->RequestFinished(method_, code, d);
    } else {
      metrics_->unmatched().RequestCounted(method_, code, d);
    }
  }

  ServerMetrics* const metrics_;
  const std::string method_;
  const absl::Time start_;
  // Hooks of one call run one at a time; these need no lock.
  ModelMetrics* model_ = nullptr;
  bool finished_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(ServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // info->method() is "/package.Service/Method".
    const absl::string_view full = info->method() != nullptr ? info->method() : "";
    if (!absl::StartsWith(full, "/rnnserve.") && !absl::StartsWith(full, "/inference.") &&
        !absl::StartsWith(full, "/tensorflow.serving.")) {
      return nullptr;
    }
    return new MetricsInterceptor(metrics_, std::string(full.substr(full.rfind('/') + 1)));
  }

 private:
  ServerMetrics* const metrics_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
NewInterceptorFactories(ServerMetrics* metrics) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<Factory>(metrics));
  return out;
}

}  // namespace rnnserve::server::metrics
