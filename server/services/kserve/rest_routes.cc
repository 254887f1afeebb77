#include "server/services/kserve/rest_routes.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "server/http/http_server.h"
#include "server/services/kserve/rest_codec.h"
#include "server/services/kserve/unsupported.h"

namespace rnnserve::server::kserve {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

http::Response Json(const json& j) { return http::Response{.body = Dump(j)}; }

http::Response Error(const absl::Status& status) { return http::ErrorResponse(status); }

// Proto3's JSON writes 64-bit integers as strings; Triton's HTTP API writes these as numbers.
void Int64sAsNumbers(json& j) {
  static constexpr absl::string_view kFields[] = {"dims",
                                                  "shape",
                                                  "last_inference",
                                                  "inference_count",
                                                  "execution_count",
                                                  "count",
                                                  "ns",
                                                  "batch_size",
                                                  "max_queue_delay_microseconds",
                                                  "default_timeout_microseconds",
                                                  "max_sequence_idle_microseconds"};
  auto number = [](json& v) {
    uint64_t u = 0;
    int64_t i = 0;
    if (!v.is_string()) return;
    if (absl::SimpleAtoi(v.get<std::string>(), &u)) {
      v = u;
    } else if (absl::SimpleAtoi(v.get<std::string>(), &i)) {
      v = i;
    }
  };
  if (j.is_array()) {
    for (json& v : j) Int64sAsNumbers(v);
    return;
  }
  if (!j.is_object()) return;
  for (auto& [key, value] : j.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) {
      Int64sAsNumbers(value);
    } else if (value.is_array()) {
      for (json& v : value) number(v);
    } else {
      number(value);
    }
  }
}

// A protobuf message as JSON with its proto field names (Triton's HTTP config and statistics).
http::Response ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return Error(absl::InternalError("the answer could not be written as JSON"));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  Int64sAsNumbers(j);
  return Json(j);
}

json TensorsJson(
    const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>&
        tensors) {
  json out = json::array();
  for (const auto& t : tensors) {
    out.push_back({{"name", t.name()},
                   {"datatype", t.datatype()},
                   {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
  }
  return out;
}

// What a path names, split: /v2/models/{m}[/versions/{v}]/{action}.
struct Path {
  std::vector<std::string> parts;  // after "v2"
};

Path Split(const std::string& path) {
  Path p;
  for (absl::string_view s : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    p.parts.emplace_back(s);
  }
  if (!p.parts.empty()) p.parts.erase(p.parts.begin());  // "v2"
  return p;
}

bool IsRepositoryChange(const Path& p) {
  return p.parts.size() == 4 && p.parts[0] == "repository" && p.parts[1] == "models" &&
         (p.parts[3] == "load" || p.parts[3] == "unload");
}

http::Response MethodNotAllowed(const http::Request& request, absl::string_view want) {
  http::Response r = Error(
      absl::InvalidArgumentError(absl::StrCat(request.method, " ", request.path, ": use ", want)));
  r.status = 405;
  return r;
}

// The body's JSON object ({} when empty), for the repository endpoints.
absl::StatusOr<json> BodyObject(const http::Request& request) {
  if (request.body.empty()) return json::object();
  json j = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.path, ": the body must be a JSON object"));
  }
  return j;
}

class RestExchange final : public InferExchange {
 public:
  explicit RestExchange(const http::Request& request) : request_(request) {}

  absl::StatusOr<DecodedInfer> Decode(const Servable& model) override {
    std::optional<size_t> header_length;
    const absl::string_view h = request_.Header("inference-header-content-length");
    if (!h.empty()) {
      size_t n = 0;
      if (!absl::SimpleAtoi(h, &n)) {
        return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length: '", h,
                                                       "' is not a non-negative integer"));
      }
      header_length = n;
    }
    if (auto s = ParseRestInfer(request_.body, header_length, &parsed_); !s.ok()) return s;
    return DecodeViews(std::move(parsed_.inputs), model);
  }
  OutputAllocator Allocate(const Servable&, const DecodedInfer&) override { return nullptr; }
  void Encode(const Servable& ran_on, const DecodedInfer& decoded,
              const std::vector<engine::Tensor>& outputs) override {
    RestInferResponse r = EncodeRestInfer(ran_on, decoded, outputs, parsed_.id);
    response_.body = std::move(r.body);
    if (r.header_length.has_value()) {
      response_.content_type = "application/octet-stream";
      response_.headers.emplace_back("Inference-Header-Content-Length",
                                     std::to_string(*r.header_length));
    }
  }
  std::string Caller() const override { return request_.caller; }

  http::Response& response() { return response_; }

 private:
  const http::Request& request_;
  RestInferRequest parsed_;
  http::Response response_;
};

// Triton's extensions that rnnserve does not serve (unsupported.h): /v2/systemsharedmemory/...,
// /v2/cudasharedmemory/..., /v2/trace/setting, /v2/models/{m}/trace/setting, /v2/logging.
std::optional<Extension> UnsupportedExtension(const Path& p) {
  const std::vector<std::string>& a = p.parts;
  if (a[0] == "systemsharedmemory") return Extension::kSystemSharedMemory;
  if (a[0] == "cudasharedmemory") return Extension::kCudaSharedMemory;
  if (a[0] == "logging") return Extension::kLogSettings;
  if (a[0] == "trace" || (a[0] == "models" && a.size() >= 4 && a[2] == "trace")) {
    return Extension::kTrace;
  }
  return std::nullopt;
}

}  // namespace

bool KServeRoutes::Owns(const http::Request& request, auth::Access* access) const {
  if (request.path != "/v2" && request.path.rfind("/v2/", 0) != 0) return false;
  const Path p = Split(request.path);
  if (!p.parts.empty() && p.parts[0] == "health") {
    *access = auth::Access::kPublic;
  } else if (IsRepositoryChange(p)) {
    *access = auth::Access::kAdmin;
  } else {
    *access = auth::Access::kInference;
  }
  return true;
}

void KServeRoutes::Infer(const http::Request& request, const std::string& model,
                         const std::string& version, http::Done done) {
  auto exchange = std::make_unique<RestExchange>(request);
  RestExchange* e = exchange.get();
  // The HTTP server holds the body's bytes in the byte budget (http_server.h).
  service_->Infer(
      InferTarget{
          .model = model, .version = version, .deadline = request.deadline, .count_request = true},
      e, [exchange = std::move(exchange), done = std::move(done)](absl::Status s) {
        done(s.ok() ? std::move(exchange->response()) : Error(s));
      });
}

void KServeRoutes::Handle(const http::Request& request, http::Done done) {
  const Path p = Split(request.path);
  const std::vector<std::string>& a = p.parts;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  auto not_found = [&] {
    return Error(absl::NotFoundError(absl::StrCat(request.path, ": no such KServe v2 endpoint")));
  };
  if (a.empty() || (a.size() == 2 && a[0] == "health")) {
    if (!get) return done(MethodNotAllowed(request, "GET"));
    if (a.empty()) {
      inference::ServerMetadataResponse m = service_->Metadata();
      std::vector<std::string> extensions(m.extensions().begin(), m.extensions().end());
      extensions.push_back("binary_tensor_data");
      return done(Json(
          {{"name", m.name()}, {"version", m.version()}, {"extensions", std::move(extensions)}}));
    }
    if (a[1] == "live") {
      return done(service_->Live() ? http::Response{.body = "{\"live\":true}"}
                                   : http::Response{.status = 400, .body = "{\"live\":false}"});
    }
    if (a[1] == "ready") {
      absl::Status ready = service_->CheckReady();
      if (ready.ok()) return done(http::Response{.body = "{\"ready\":true}"});
      http::Response r = Error(ready);
      r.status = 400;
      return done(std::move(r));
    }
    return done(not_found());
  }
  if (a[0] == "repository") {
    if (!post) return done(MethodNotAllowed(request, "POST"));
    auto body = BodyObject(request);
    if (!body.ok()) return done(Error(body.status()));
    if (a.size() == 2 && a[1] == "index") {
      const bool ready_only = body->value("ready", false);
      json out = json::array();
      const inference::RepositoryIndexResponse index = service_->Index(ready_only);
      for (const auto& m : index.models()) {
        json entry = {{"name", m.name()}, {"state", m.state()}};
        if (!m.version().empty()) entry["version"] = m.version();
        if (!m.reason().empty()) entry["reason"] = m.reason();
        out.push_back(std::move(entry));
      }
      return done(Json(out));
    }
    if (!IsRepositoryChange(p)) return done(not_found());
    if (body->contains("parameters") && (*body)["parameters"].is_object()) {
      for (const auto& [name, value] : (*body)["parameters"].items()) {
        if (name != "unload_dependents") return done(Error(ParameterRefused(a[2], name)));
      }
    }
    const absl::Status s = a[3] == "load" ? service_->Load(a[2]) : service_->Unload(a[2]);
    return done(s.ok() ? http::Response{.body = ""} : Error(s));
  }
  if (const std::optional<Extension> e = UnsupportedExtension(p)) {
    return done(Error(Unsupported(*e, request.method + " " + request.path)));
  }
  if (a[0] != "models" || a.size() < 2) return done(not_found());
  if (a.size() == 2 && a[1] == "stats") {
    if (!get) return done(MethodNotAllowed(request, "GET"));
    auto stats = service_->Statistics("", "");
    return done(stats.ok() ? ProtoJson(*stats) : Error(stats.status()));
  }
  const std::string& model = a[1];
  size_t next = 2;
  std::string version;
  if (a.size() >= 4 && a[2] == "versions") {
    version = a[3];
    next = 4;
  }
  if (a.size() > next + 1) return done(not_found());
  const std::string action = a.size() == next ? "" : a[next];
  if (action == "infer") {
    if (!post) return done(MethodNotAllowed(request, "POST"));
    return Infer(request, model, version, std::move(done));
  }
  if (!get) return done(MethodNotAllowed(request, "GET"));
  if (action.empty()) {
    auto m = service_->Metadata(model, version);
    if (!m.ok()) return done(Error(m.status()));
    return done(
        Json({{"name", m->name()},
              {"versions", std::vector<std::string>(m->versions().begin(), m->versions().end())},
              {"platform", m->platform()},
              {"inputs", TensorsJson(m->inputs())},
              {"outputs", TensorsJson(m->outputs())}}));
  }
  if (action == "ready") {
    auto ready = service_->ModelIsReady(model, version);
    if (!ready.ok()) return done(Error(ready.status()));
    return done(*ready ? http::Response{.body = "{\"ready\":true}"}
                       : http::Response{.status = 400, .body = "{\"ready\":false}"});
  }
  if (action == "config") {
    auto config = service_->Config(model, version);
    return done(config.ok() ? ProtoJson(*config) : Error(config.status()));
  }
  if (action == "stats") {
    auto stats = service_->Statistics(model, version);
    return done(stats.ok() ? ProtoJson(*stats) : Error(stats.status()));
  }
  return done(not_found());
}

}  // namespace rnnserve::server::kserve
