#include "server/services/kserve/rest_codec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/services/kserve/datatype.h"

namespace rnnserve::server::kserve {
namespace {

using json = nlohmann::json;
constexpr int kMaxNesting = 32;  // of a "data" array: deeper is refused, not recursed into

absl::Status Invalid(absl::string_view what, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", expected));
}

// A JSON value as an InferParameter: bool, integer (int64, or uint64 above it), number
// (double) or string.
absl::Status ToParameter(const json& j, const std::string& what, inference::InferParameter* out) {
  switch (j.type()) {
    case json::value_t::boolean:
      out->set_bool_param(j.get<bool>());
      return absl::OkStatus();
    case json::value_t::number_integer:
      out->set_int64_param(j.get<int64_t>());
      return absl::OkStatus();
    case json::value_t::number_unsigned:
      if (j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        out->set_int64_param(j.get<int64_t>());
      } else {
        out->set_uint64_param(j.get<uint64_t>());
      }
      return absl::OkStatus();
    case json::value_t::number_float:
      out->set_double_param(j.get<double>());
      return absl::OkStatus();
    case json::value_t::string:
      out->set_string_param(j.get<std::string>());
      return absl::OkStatus();
    default:
      return Invalid(what, "must be a bool, a number or a string");
  }
}

absl::Status ToParameters(const json& j, const std::string& what, InferParameters* out) {
  if (!j.is_object()) return Invalid(what, "must be a JSON object");
  for (const auto& [name, value] : j.items()) {
    if (auto s = ToParameter(value, absl::StrCat(what, " '", name, "'"), &(*out)[name]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Appends the values of `data` (flat or nested arrays of numbers), row-major, as `type`.
absl::Status Flatten(const json& data, core::ElementType type, int depth, const std::string& what,
                     std::string* out) {
  if (data.is_array()) {
    if (depth >= kMaxNesting) return Invalid(what, "'data' is nested too deeply");
    for (const json& v : data) {
      if (auto s = Flatten(v, type, depth + 1, what, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  const bool integer = type == core::ElementType::kInt32 || type == core::ElementType::kInt64;
  if (integer ? !data.is_number_integer() : !data.is_number()) {
    return Invalid(what, absl::StrCat("'data' holds ", data.dump(), "; ", DatatypeName(type),
                                      " takes ", integer ? "integers" : "numbers"));
  }
  auto put = [out](auto v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  switch (type) {
    case core::ElementType::kFp32:
      put(data.get<float>());
      break;
    case core::ElementType::kFp64:
      put(data.get<double>());
      break;
    case core::ElementType::kInt32: {
      const bool fits = data.is_number_unsigned()
                            ? data.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
                            : data.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                                  data.get<int64_t>() <= std::numeric_limits<int32_t>::max();
      if (!fits) return Invalid(what, absl::StrCat(data.dump(), " is out of INT32's range"));
      put(data.get<int32_t>());
      break;
    }
    default:
      if (data.is_number_unsigned() &&
          data.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(what, absl::StrCat(data.dump(), " is out of INT64's range"));
      }
      put(data.get<int64_t>());
  }
  return absl::OkStatus();
}

// The elements of `shape`, or an error for a negative axis or an absurd count.
absl::StatusOr<int64_t> Elements(const engine::Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Invalid(what, "'shape' must not hold a negative axis");
    if (d > 0 && n > (int64_t{1} << 40) / d) return Invalid(what, "'shape' is too large");
    n *= d;
  }
  return n;
}

absl::Status ParseInput(const json& in, absl::string_view binary, size_t* binary_used,
                        RestInferRequest* request) {
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) {
    return absl::InvalidArgumentError("inputs: each input must be an object with a \"name\"");
  }
  core::InputView view;
  view.name = in["name"].get<std::string>();
  const std::string what = absl::StrCat("input '", view.name, "'");
  if (!in.contains("datatype") || !in["datatype"].is_string()) {
    return Invalid(what, "needs a \"datatype\" string (FP32, FP64, INT32 or INT64)");
  }
  auto type = ParseDatatype(in["datatype"].get<std::string>(), what);
  if (!type.ok()) return type.status();
  view.type = *type;
  if (!in.contains("shape") || !in["shape"].is_array()) {
    return Invalid(what, "needs a \"shape\", an array of integers");
  }
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer()) return Invalid(what, "'shape' must hold integers only");
    view.shape.push_back(d.get<int64_t>());
  }
  auto n = Elements(view.shape, what);
  if (!n.ok()) return n.status();
  const int64_t bytes = *n * core::ElementBytes(view.type);
  const json* size = nullptr;
  if (in.contains("parameters")) {
    const json& p = in["parameters"];
    if (!p.is_object()) return Invalid(what, "'parameters' must be a JSON object");
    if (p.contains("binary_data_size")) size = &p["binary_data_size"];
  }
  if (size != nullptr) {
    if (in.contains("data")) return Invalid(what, "has both 'data' and 'binary_data_size'");
    if (!size->is_number_unsigned()) {
      return Invalid(what, "'binary_data_size' must be a non-negative integer");
    }
    const uint64_t given = size->get<uint64_t>();
    if (given != static_cast<uint64_t>(bytes)) {
      return Invalid(what, absl::StrCat("binary_data_size is ", given, " bytes; shape ",
                                        engine::ShapeString(view.shape), " of ",
                                        DatatypeName(view.type), " needs ", bytes));
    }
    if (given > binary.size() - *binary_used) {
      return Invalid(what,
                     absl::StrCat("binary_data_size ", given, " runs past the body (",
                                  binary.size() - *binary_used, " bytes of binary data left)"));
    }
    view.bytes = binary.substr(*binary_used, given);
    *binary_used += given;
  } else {
    if (!in.contains("data")) return Invalid(what, "needs 'data' or 'binary_data_size'");
    auto values = std::make_unique<std::string>();
    // The shape is the client's word, not yet checked against the data: reserve what fits in
    // 1 MiB at most (a shape of 2^40 elements asked for 4 TiB, and failed the call INTERNAL).
    values->reserve(static_cast<size_t>(std::min<int64_t>(bytes, int64_t{1} << 20)));
    if (auto s = Flatten(in["data"], view.type, 0, what, values.get()); !s.ok()) return s;
    if (static_cast<int64_t>(values->size()) != bytes) {
      return Invalid(
          what, absl::StrCat("'data' holds ", values->size() / core::ElementBytes(view.type),
                             " values; shape ", engine::ShapeString(view.shape), " needs ", *n));
    }
    view.bytes = *values;
    request->values.push_back(std::move(values));
  }
  request->inputs.inputs.push_back(std::move(view));
  return absl::OkStatus();
}

absl::Status ParseOutputs(const json& outputs, RestInferRequest* request) {
  if (!outputs.is_array()) return Invalid("outputs", "must be an array");
  for (const json& out : outputs) {
    if (!out.is_object() || !out.contains("name") || !out["name"].is_string()) {
      return Invalid("outputs", "each output must be an object with a \"name\"");
    }
    std::string name = out["name"].get<std::string>();
    bool binary = request->inputs.default_raw;
    if (out.contains("parameters")) {
      const json& p = out["parameters"];
      if (!p.is_object()) return Invalid("output '" + name + "'", "'parameters' must be an object");
      if (p.contains("binary_data")) {
        if (!p["binary_data"].is_boolean()) {
          return Invalid("output '" + name + "'", "parameter 'binary_data' must be a bool");
        }
        binary = p["binary_data"].get<bool>();
      }
    }
    request->inputs.outputs.push_back({std::move(name), binary});
  }
  return absl::OkStatus();
}

// A JSON string; invalid UTF-8 is replaced, never thrown on.
std::string Quote(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append(std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendFloat(std::string* out, float v) {
  if (!std::isfinite(v)) return AppendNumber(out, v);
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);  // the shortest that reads back as v
  out->append(buf, r.ptr);
}

}  // namespace

absl::Status ParseRestInfer(absl::string_view body, std::optional<size_t> header_length,
                            RestInferRequest* request) {
  if (header_length.has_value() && *header_length > body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length ",
                                                   *header_length, " is past the body's ",
                                                   body.size(), " bytes"));
  }
  const absl::string_view header = body.substr(0, header_length.value_or(body.size()));
  const absl::string_view binary = body.substr(header.size());
  json j = json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON (a KServe v2 inference request: {\"inputs\": [...]}; "
        "with binary data, Inference-Header-Content-Length gives the JSON's length)");
  }
  if (!j.is_object()) return Invalid("the request", "must be a JSON object");
  if (j.contains("id")) {
    if (!j["id"].is_string()) return Invalid("id", "must be a string");
    request->id = j["id"].get<std::string>();
  }
  request->inputs.default_raw = false;
  if (j.contains("parameters")) {
    if (auto s = ToParameters(j["parameters"], "parameter", &request->parameters); !s.ok()) {
      return s;
    }
    auto it = request->parameters.find("binary_data_output");
    if (it != request->parameters.end()) {
      if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
        return Invalid("parameter 'binary_data_output'", "must be a bool");
      }
      request->inputs.default_raw = it->second.bool_param();
    }
  }
  request->inputs.parameters = &request->parameters;
  if (!j.contains("inputs") || !j["inputs"].is_array()) {
    return Invalid("the request", "needs \"inputs\", an array of tensors");
  }
  size_t binary_used = 0;
  for (const json& in : j["inputs"]) {
    if (auto s = ParseInput(in, binary, &binary_used, request); !s.ok()) return s;
  }
  if (binary_used != binary.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body holds ", binary.size(),
                     " bytes of binary data after the JSON header; the "
                     "inputs' binary_data_size add up to ",
                     binary_used));
  }
  if (j.contains("outputs")) return ParseOutputs(j["outputs"], request);
  return absl::OkStatus();
}

RestInferResponse EncodeRestInfer(const Servable& ran_on, const DecodedInfer& decoded,
                                  const std::vector<engine::Tensor>& outputs,
                                  const std::string& id) {
  RestInferResponse response;
  std::string& out = response.body;
  out = absl::StrCat("{\"model_name\":", Quote(ran_on.name()), ",\"model_version\":\"",
                     ran_on.version(), "\"");
  if (!id.empty()) absl::StrAppend(&out, ",\"id\":", Quote(id));
  out.append(",\"outputs\":[");
  std::vector<const engine::Tensor*> binary;
  for (size_t k = 0; k < decoded.outputs.size(); ++k) {
    const DecodedInfer::Output& o = decoded.outputs[k];
    if (o.index >= static_cast<int>(outputs.size())) continue;  // Run fills every output
    const engine::Tensor& t = outputs[o.index];
    const bool f32 = t.dtype() == engine::DType::kFloat32;
    if (k > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"name\":", Quote(ran_on.outputs()[o.index].name), ",\"datatype\":\"",
                    DatatypeName(t.dtype()), "\",\"shape\":[");
    for (size_t d = 0; d < t.shape().size(); ++d) {
      absl::StrAppend(&out, d > 0 ? "," : "", t.shape()[d]);
    }
    out.push_back(']');
    const size_t bytes = t.num_elements() * (f32 ? sizeof(float) : sizeof(int64_t));
    if (o.raw) {
      absl::StrAppend(&out, ",\"parameters\":{\"binary_data_size\":", bytes, "}}");
      binary.push_back(&t);
      continue;
    }
    out.append(",\"data\":[");
    out.reserve(out.size() + t.num_elements() * 12);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (i > 0) out.push_back(',');
      if (f32) {
        AppendFloat(&out, t.f32()[i]);
      } else {
        absl::StrAppend(&out, t.i64()[i]);
      }
    }
    out.append("]}");
  }
  out.append("]}");
  if (binary.empty()) return response;
  response.header_length = out.size();
  for (const engine::Tensor* t : binary) {
    const bool f32 = t->dtype() == engine::DType::kFloat32;
    const char* data =
        f32 ? reinterpret_cast<const char*>(t->f32()) : reinterpret_cast<const char*>(t->i64());
    out.append(data, t->num_elements() * (f32 ? sizeof(float) : sizeof(int64_t)));
  }
  return response;
}

}  // namespace rnnserve::server::kserve
