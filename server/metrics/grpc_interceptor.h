#pragma once

// A gRPC server interceptor that records every call of rnnserve's own services
// (rnnserve.v1.RnnServe, and the KServe v2 inference.GRPCInferenceService):
// rnnserve_requests_total{model,version,method,code}, rnnserve_request_duration_seconds and
// rnnserve_inflight_requests. Health checks and reflection are not recorded.
//
// The model comes from the request message (`model_spec {name, version}` in rnnserve.v1,
// `model_name` / `model_version` in KServe) and is looked up in ServerMetrics: a name or
// version that is not loaded is counted under model="" and version="", so a client cannot
// create series. The duration runs from the call's start to the status being sent.
//
//   builder.experimental().SetInterceptorCreators(
//       metrics::NewInterceptorFactories(&metrics::ServerMetrics::Global()));

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

#include "server/metrics/server_metrics.h"

namespace rnnserve::server::metrics {

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
NewInterceptorFactories(ServerMetrics* metrics);

}  // namespace rnnserve::server::metrics
