#pragma once

// KServe v2 / Open Inference Protocol over HTTP (REST), as an http::Routes on the HTTP server
// (server/http/): the same answers as the gRPC service, through its protocol-neutral methods
// (kserve_service.h), so both share one inference flow and one statistics.
//
//   GET  /v2                                    server metadata
//   GET  /v2/health/live, /v2/health/ready      200, or 400 with the reason (no token needed)
//   GET  /v2/models/{m}[/versions/{v}]          model metadata
//   GET  .../ready                              200, or 400 when not ready
//   GET  .../config                             Triton's ModelConfig as JSON (proto field names)
//   GET  .../stats, /v2/models/stats            ModelStatisticsResponse as JSON
//   POST .../infer                              rest_codec.h
//   POST /v2/repository/index                   [{"name", "version", "state", "reason"}]
//   POST /v2/repository/models/{m}/load|unload  admin tokens
// Errors: {"error": "<CODE>: <message>"} with http_server.h's status for the code.

#include "server/http/route.h"
#include "server/services/kserve/kserve_service.h"

namespace rnnserve::server::kserve {

class KServeRoutes final : public http::Routes {
 public:
  // `service` is not owned and must outlive the routes.
  explicit KServeRoutes(KServeService* service) : service_(service) {}

  bool Owns(const http::Request& request, auth::Access* access) const override;
  void Handle(const http::Request& request, http::Done done) override;

 private:
  void Infer(const http::Request& request, const std::string& model, const std::string& version,
             http::Done done);

  KServeService* const service_;
};

}  // namespace rnnserve::server::kserve
