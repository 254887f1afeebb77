// The access table (server/auth/access_control.h): every method of every service the server
// registers has a role, the roles are the documented ones, and the verdict fails closed.

#include "server/auth/access_control.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <string>

#include "grpc/health/v1/health.pb.h"
#include "inference/grpc_service.pb.h"
#include "rnnserve/v1/rnnserve.pb.h"
#include "tests/support/tfserving_services.h"

namespace rnnserve::server::auth {
namespace {

TEST(AccessControlTest, EveryMethodOfEveryServedServiceHasARole) {
  const google::protobuf::ServiceDescriptor* services[] = {
      v1::PredictRequest::descriptor()->file()->FindServiceByName("RnnServe"),
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService"),
      grpc::health::v1::HealthCheckRequest::descriptor()->file()->FindServiceByName("Health"),
      testing::TfServingService("tensorflow.serving.PredictionService"),
      testing::TfServingService("tensorflow.serving.ModelService"),
  };
  int methods = 0;
  for (const auto* service : services) {
    ASSERT_NE(service, nullptr);
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string full = "/" + service->full_name() + "/" + service->method(i)->name();
      EXPECT_TRUE(AccessOf(full).has_value()) << full << " is not in the access table";
      ++methods;
    }
  }
  EXPECT_GE(methods, 27);
}

TEST(AccessControlTest, ModelControlIsAdminsProbesArePublicTheRestInference) {
  EXPECT_EQ(AccessOf("/rnnserve.v1.RnnServe/LoadModel"), Access::kAdmin);
  EXPECT_EQ(AccessOf("/rnnserve.v1.RnnServe/UnloadModel"), Access::kAdmin);
  EXPECT_EQ(AccessOf("/inference.GRPCInferenceService/ServerLive"), Access::kPublic);
  EXPECT_EQ(AccessOf("/grpc.health.v1.Health/Check"), Access::kPublic);
  EXPECT_EQ(AccessOf("/rnnserve.v1.RnnServe/Predict"), Access::kInference);
  EXPECT_EQ(AccessOf("/inference.GRPCInferenceService/ModelInfer"), Access::kInference);
  EXPECT_EQ(AccessOf("/tensorflow.serving.PredictionService/Predict"), Access::kInference);
  EXPECT_EQ(AccessOf("/tensorflow.serving.ModelService/HandleReloadConfigRequest"), Access::kAdmin);
  EXPECT_FALSE(AccessOf("/rnnserve.v1.RnnServe/NoSuchMethod").has_value());
  EXPECT_FALSE(AccessOf("").has_value());
}

TEST(AccessControlTest, LocalPeersAreLoopbackAndUnixSockets) {
  EXPECT_TRUE(IsLocalPeer("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv4:127.1.2.3:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::1]:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv6:%5B::1%5D:5000"));
  EXPECT_TRUE(IsLocalPeer("unix:/tmp/rnnserve.sock"));
  EXPECT_FALSE(IsLocalPeer("ipv4:10.0.0.7:5000"));
  EXPECT_FALSE(IsLocalPeer("ipv4:128.0.0.1:5000"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[2001:db8::1]:5000"));
  EXPECT_FALSE(IsLocalPeer(""));
}

TEST(AccessControlTest, ModelControlBeyondLoopbackNeedsAdminTokensOrTheSwitch) {
  EXPECT_TRUE(CheckModelControl({}, "ipv4:127.0.0.1:1").ok());
  const grpc::Status refused = CheckModelControl({}, "ipv4:10.0.0.7:1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(refused.error_message().find("--allow-remote-model-control"), std::string::npos);
  const TokenAuthorizer inference_only({"inference-token"}, {});
  EXPECT_EQ(CheckModelControl({.authorizer = &inference_only}, "ipv4:10.0.0.7:1").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  const TokenAuthorizer with_admin({}, {"admin-token"});
  EXPECT_TRUE(CheckModelControl({.authorizer = &with_admin}, "ipv4:10.0.0.7:1").ok());
  EXPECT_TRUE(CheckModelControl({.remote_model_control = true}, "ipv4:10.0.0.7:1").ok());
}

TEST(AccessControlTest, WithoutTokensNothingButModelControlIsCheckedWithTokensUncheckedIsRefused) {
  grpc::ServerContext context;
  EXPECT_NE(NewAccessInterceptor({}), nullptr);
  EXPECT_TRUE(Verdict(context).ok());
  static const TokenAuthorizer tokens({"secret-token"}, {});
  EXPECT_NE(NewAccessInterceptor({.authorizer = &tokens}), nullptr);
  // A call the interceptor never saw (a method of no table) fails closed.
  EXPECT_EQ(Verdict(context).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace rnnserve::server::auth
