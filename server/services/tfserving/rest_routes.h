#pragma once

// TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) as routes of the
// HTTP server (server/http/route.h). It owns every path under /v1/, as TF Serving does:
//
//   POST /v1/models/{name}[/versions/{v}|/labels/{label}]:predict   rest_json.h
//   GET  /v1/models/{name}[/versions/{v}|/labels/{label}]           model status
//   GET  /v1/models/{name}[/versions/{v}|/labels/{label}]/metadata  model spec + signature_def
//   POST ...:classify, ...:regress                                  501, use :predict
//
// Status and metadata are TF Serving's protobuf messages (model_spec.h) printed as it prints
// them (field names as in the .proto, every field, int64 as strings). Errors are
// {"error": "<message>"} with TF Serving's HTTP codes: INVALID_ARGUMENT 400, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, FAILED_PRECONDITION 412, DEADLINE_EXCEEDED 504, UNIMPLEMENTED 501,
// UNAVAILABLE 503, INTERNAL 500 (HttpStatusOf). A path under /v1/ that names none of these is
// 400 "Malformed request: <METHOD> <path>".
// Every route needs inference access.

#include <string>

#include "absl/status/status.h"
#include "server/http/route.h"
#include "server/model_repository.h"
#include "server/services/tfserving/model_spec.h"
#include "server/services/tfserving/tfserving_service.h"

namespace rnnserve::server::tfserving {

// TF Serving's HTTP status for a status code.
int HttpStatusOf(absl::StatusCode code);

class RestRoutes final : public http::Routes {
 public:
  // `repository` is not owned and must outlive the routes.
  RestRoutes(const ModelRepository* repository, TfServingOptions options)
      : repository_(repository), options_(options) {}

  bool Owns(const http::Request& request, auth::Access* access) const override;
  void Handle(const http::Request& request, http::Done done) override;

 private:
  void Predict(const http::Request& request, const Target& target, http::Done done);

  const ModelRepository* const repository_;
  const TfServingOptions options_;
};

}  // namespace rnnserve::server::tfserving
