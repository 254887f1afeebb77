#include "server/services/tfserving/rest_routes.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "server/services/tfserving/rest_json.h"
#include "server/services/tfserving/run_predict.h"

namespace rnnserve::server::tfserving {
namespace {

constexpr absl::string_view kPrefix = "/v1/";
constexpr absl::string_view kModels = "/v1/models/";

// A path under /v1/models/: the model version it names, and what is asked of it.
struct Route {
  Target target;
  std::string verb;  // after ':' ("predict", ...); empty for GETs
  bool metadata = false;
};

absl::Status Malformed(const http::Request& request) {
  return absl::InvalidArgumentError(
      absl::StrCat("Malformed request: ", request.method, " ", request.path));
}

absl::StatusOr<Route> ParseRoute(const http::Request& request) {
  if (!absl::StartsWith(request.path, kModels)) return Malformed(request);
  absl::string_view rest = absl::string_view(request.path).substr(kModels.size());
  Route route;
  if (const size_t colon = rest.find(':'); colon != absl::string_view::npos) {
    route.verb = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  if (!parts.empty() && parts.back() == "metadata" && parts.size() % 2 == 0) {
    route.metadata = true;
    parts.pop_back();
  }
  if (parts.empty() || parts[0].empty() || (parts.size() != 1 && parts.size() != 3)) {
    return Malformed(request);
  }
  route.target.name = std::string(parts[0]);
  if (parts.size() == 3) {
    if (parts[1] == "versions") {
      if (!absl::SimpleAtoi(parts[2], &route.target.version)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Failed to convert version: ", parts[2], " to numeric."));
      }
      route.target.has_version = true;
    } else if (parts[1] == "labels" && !parts[2].empty()) {
      route.target.label = std::string(parts[2]);
    } else {
      return Malformed(request);
    }
  }
  const bool post = request.method == "POST";
  if (post != !route.verb.empty() || (post && route.metadata) ||
      (!post && request.method != "GET")) {
    return Malformed(request);
  }
  return route;
}

http::Response Answer(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http::Response ErrorAnswer(const absl::Status& s) {
  return Answer(HttpStatusOf(s.code()), JsonError(s.message()));
}

// `message` as TF Serving prints its messages: every field, names as in the .proto.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  if (auto s = google::protobuf::util::MessageToJsonString(message, &out, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot print ", message.GetTypeName(), " as JSON"));
  }
  return out;
}

absl::StatusOr<std::string> Status(const ModelRepository& repository, const Target& target) {
  tensorflow::serving::GetModelStatusResponse response;
  if (auto s = GetModelStatus(repository, target, &response); !s.ok()) return s;
  return ToJson(response);
}

absl::StatusOr<std::string> Metadata(const ModelRepository& repository, const Target& target) {
  auto model = FindModel(repository, target);
  if (!model.ok()) return model.status();
  tensorflow::serving::ModelSpec spec;
  SetMetadataSpec(**model, &spec);
  auto spec_json = ToJson(spec);
  if (!spec_json.ok()) return spec_json.status();
  auto sigs_json = ToJson(SignatureDefsOf(**model));
  if (!sigs_json.ok()) return sigs_json.status();
  return absl::StrCat("{\n\"model_spec\":", *spec_json,
                      ",\n\"metadata\": {\"signature_def\": ", *sigs_json, "}\n}\n");
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kFailedPrecondition:
      return 412;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    default:
      return 500;
  }
}

bool RestRoutes::Owns(const http::Request& request, auth::Access* access) const {
  if (!absl::StartsWith(request.path, kPrefix)) return false;
  *access = auth::Access::kInference;
  return true;
}

void RestRoutes::Handle(const http::Request& request, http::Done done) {
  auto route = ParseRoute(request);
  if (!route.ok()) return done(ErrorAnswer(route.status()));
  if (route->verb == "predict") return Predict(request, route->target, std::move(done));
  if (route->verb == "classify" || route->verb == "regress") {
    return done(ErrorAnswer(absl::UnimplementedError(
        absl::StrCat(":", route->verb,
                     " is not served by rnnserve (it needs tf.Example inputs); POST the "
                     "model's input tensors to /v1/models/",
                     route->target.name, ":predict"))));
  }
  if (!route->verb.empty()) return done(ErrorAnswer(Malformed(request)));
  auto body =
      route->metadata ? Metadata(*repository_, route->target) : Status(*repository_, route->target);
  if (!body.ok()) return done(ErrorAnswer(body.status()));
  done(Answer(200, *std::move(body)));
}

void RestRoutes::Predict(const http::Request& request, const Target& target, http::Done done) {
  auto model = FindModel(*repository_, target);
  if (!model.ok()) return done(ErrorAnswer(model.status()));
  auto decoded = DecodeJsonPredict(request.body, **model);
  if (!decoded.ok()) return done(ErrorAnswer(decoded.status()));
  if (auto s = CheckSignature(**model, (*decoded)->signature_name); !s.ok()) {
    return done(ErrorAnswer(s));
  }
  const core::Request& core_request = (*decoded)->request;
  RunOptions options{.deadline = request.deadline, .caller = request.caller};
  RunPredict(*model, core_request, static_cast<int64_t>(request.body.size()), options_.limits,
             std::move(options),
             [model = *model, decoded = *std::move(decoded),
              done = std::move(done)](absl::StatusOr<std::vector<engine::Tensor>> outputs) {
               if (!outputs.ok()) return done(ErrorAnswer(outputs.status()));
               auto body = EncodeJsonPredict(*model, decoded->row_format, *outputs);
               if (!body.ok()) return done(ErrorAnswer(body.status()));
               done(Answer(200, *std::move(body)));
             });
}

}  // namespace rnnserve::server::tfserving
