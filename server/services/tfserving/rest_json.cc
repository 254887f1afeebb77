#include "server/services/tfserving/rest_json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace rnnserve::server::tfserving {
namespace {

using Json = nlohmann::json;

std::string ShapeText(const engine::Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// JSON text of `v`; invalid UTF-8 (from a URL or a model) replaced, never thrown about.
std::string Dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool IsBytes(const Json& v) { return v.is_object() && v.size() == 1 && v.contains("b64"); }

// Flattens one JSON value of one input into `out`, row-major, and finds its shape. `what`
// names it in errors.
// Deeper nesting is refused before it is walked (the walk recurses).
constexpr size_t kMaxRank = 16;

template <typename T>
class Flattener {
 public:
  Flattener(std::string what, std::vector<T>* out) : what_(std::move(what)), out_(out) {}

  // Appends `v`'s values; its shape must equal `*shape` when that is set, else sets it.
  absl::Status Add(const Json& v, engine::Shape* shape, bool shape_set) {
    if (!shape_set) {
      shape->clear();
      for (const Json* p = &v; p->is_array(); p = &(*p)[0]) {
        shape->push_back(static_cast<int64_t>(p->size()));
        if (shape->size() > kMaxRank) {
          return absl::InvalidArgumentError(absl::StrCat(what_, ": lists nested deeper than ",
                                                         kMaxRank, "; expected a tensor's values"));
        }
        if (p->empty()) break;
      }
    }
    shape_ = shape;
    return Walk(v, 0);
  }

 private:
  absl::Status Walk(const Json& v, size_t depth) {
    const engine::Shape& shape = *shape_;
    if (v.is_array()) {
      if (depth >= shape.size() || static_cast<int64_t>(v.size()) != shape[depth]) {
        return absl::InvalidArgumentError(
            absl::StrCat(what_, ": a list at depth ", depth, " has ", v.size(),
                         " elements where shape ", ShapeText(shape),
                         " was expected; the values must not be ragged (pad shorter "
                         "sequences to one length)"));
      }
      for (const Json& e : v) {
        if (auto s = Walk(e, depth + 1); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (depth != shape.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": a number at depth ", depth, " where shape ", ShapeText(shape),
                       " was expected; the values must not be ragged"));
    }
    return Leaf(v);
  }

  absl::Status Leaf(const Json& v) {
    if (IsBytes(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": {\"b64\": ...} carries bytes; expected numbers (",
                       std::is_same_v<T, float> ? "DT_FLOAT" : "DT_INT64 token ids", ")"));
    }
    if constexpr (std::is_same_v<T, float>) {
      if (v.is_number() && std::abs(v.get<double>()) <= std::numeric_limits<float>::max()) {
        out_->push_back(static_cast<float>(v.get<double>()));
        return absl::OkStatus();
      }
    } else {
      if (v.is_number_integer() &&
          (!v.is_number_unsigned() ||
           v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
        out_->push_back(v.get<int64_t>());
        return absl::OkStatus();
      }
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d == std::floor(d) && std::abs(d) < 9.0e15) {
          out_->push_back(static_cast<int64_t>(d));
          return absl::OkStatus();
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        what_, ": value ", Dump(v), " is not ",
        std::is_same_v<T, float> ? "a number (DT_FLOAT)" : "a whole number (DT_INT64 token ids)"));
  }

  const std::string what_;
  std::vector<T>* const out_;
  const engine::Shape* shape_ = nullptr;
};

// One input's values, gathered from one JSON value (columnar) or from every row's (row format).
class InputBuilder {
 public:
  InputBuilder(JsonPredict* out, const TensorSignature& sig, const std::string& name)
      : out_(out), ints_(sig.dtype == engine::DType::kInt64), name_(name) {
    if (ints_) {
      out_->ints.emplace_back();
    } else {
      out_->floats.emplace_back();
    }
  }

  // Adds `v`, all of whose values must have one shape (row format: one row per call).
  absl::Status Add(const Json& v, const std::string& what) {
    const bool set = rows_ > 0;
    absl::Status s = ints_ ? Flattener<int64_t>(what, &out_->ints.back()).Add(v, &shape_, set)
                           : Flattener<float>(what, &out_->floats.back()).Add(v, &shape_, set);
    ++rows_;
    return s;
  }

  // The view of what was added; `rows`: prepend a batch axis of the rows added.
  core::InputView View(bool rows) const {
    core::InputView view{.name = name_, .shape = shape_};
    if (rows) view.shape.insert(view.shape.begin(), rows_);
    if (ints_) {
      view.type = core::ElementType::kInt64;
      view.bytes = core::BytesOf(out_->ints.back());
    } else {
      view.type = core::ElementType::kFp32;
      view.bytes = core::BytesOf(out_->floats.back());
    }
    return view;
  }

 private:
  JsonPredict* const out_;
  const bool ints_;
  const std::string name_;
  engine::Shape shape_;
  int64_t rows_ = 0;
};

std::string InputNames(const Servable& model) {
  std::vector<std::string> names;
  for (const auto& in : model.inputs()) names.push_back(absl::StrCat("'", in.name, "'"));
  return absl::StrJoin(names, ", ");
}

// The model input a JSON key names (a single-input model's for any key, as the core allows).
absl::StatusOr<const TensorSignature*> InputFor(const Servable& model, const std::string& key) {
  for (const auto& in : model.inputs()) {
    if (in.name == key) return &in;
  }
  if (model.inputs().size() == 1) return &model.inputs()[0];
  return absl::InvalidArgumentError(absl::StrCat("input '", key,
                                                 "': the model has no such "
                                                 "input; its inputs are ",
                                                 InputNames(model)));
}

absl::Status DecodeColumnar(const Json& inputs, const Servable& model, JsonPredict* out) {
  if (!inputs.is_object() || IsBytes(inputs)) {
    if (model.inputs().size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"inputs\": a bare value feeds a model with one input; this one has ",
                       InputNames(model), ": send {\"<input>\": value, ...}"));
    }
    const TensorSignature& sig = model.inputs()[0];
    InputBuilder b(out, sig, sig.name);
    if (auto s = b.Add(inputs, absl::StrCat("input '", sig.name, "'")); !s.ok()) return s;
    out->request.inputs.push_back(b.View(false));
    return absl::OkStatus();
  }
  for (const auto& [key, value] : inputs.items()) {
    auto sig = InputFor(model, key);
    if (!sig.ok()) return sig.status();
    InputBuilder b(out, **sig, key);
    if (auto s = b.Add(value, absl::StrCat("input '", key, "'")); !s.ok()) return s;
    out->request.inputs.push_back(b.View(false));
  }
  return absl::OkStatus();
}

absl::Status DecodeRows(const Json& instances, const Servable& model, JsonPredict* out) {
  if (!instances.is_array() || instances.empty()) {
    return absl::InvalidArgumentError(
        "\"instances\": expected a non-empty list, one entry per batch row");
  }
  const bool named = instances[0].is_object() && !IsBytes(instances[0]);
  if (!named) {
    if (model.inputs().size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"instances\": a bare value per row feeds a model with one input; this one has ",
          InputNames(model), ": send rows as {\"<input>\": value, ...}"));
    }
    const TensorSignature& sig = model.inputs()[0];
    InputBuilder b(out, sig, sig.name);
    for (size_t r = 0; r < instances.size(); ++r) {
      if (instances[r].is_object() && !IsBytes(instances[r])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"instances\": row ", r, " is an object, row 0 a value; rows must be alike"));
      }
      const std::string what = absl::StrCat("input '", sig.name, "' of instance ", r);
      if (auto s = b.Add(instances[r], what); !s.ok()) return s;
    }
    out->request.inputs.push_back(b.View(true));
    return absl::OkStatus();
  }
  for (const auto& [key, unused] : instances[0].items()) {
    auto sig = InputFor(model, key);
    if (!sig.ok()) return sig.status();
    InputBuilder b(out, **sig, key);
    for (size_t r = 0; r < instances.size(); ++r) {
      const Json& row = instances[r];
      if (!row.is_object() || !row.contains(key) || row.size() != instances[0].size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"instances\": row ", r, " does not name the inputs row 0 names (",
            instances[0].size(), " inputs, '", key, "' among them); rows must be alike"));
      }
      const std::string what = absl::StrCat("input '", key, "' of instance ", r);
      if (auto s = b.Add(row[key], what); !s.ok()) return s;
    }
    out->request.inputs.push_back(b.View(true));
  }
  return absl::OkStatus();
}

// Writers of the answer.

void AppendFloat(float f, std::string* out) {
  if (std::isnan(f)) {
    out->append("NaN");
  } else if (std::isinf(f)) {
    out->append(f > 0 ? "Infinity" : "-Infinity");
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
    out->append(buf, end);
  }
}

// Writes the values of `t` under index `offset` of axis `axis` as nested lists.
void AppendValues(const engine::Tensor& t, int axis, int64_t offset, std::string* out) {
  if (axis == t.rank()) {
    if (t.dtype() == engine::DType::kInt64) {
      absl::StrAppend(out, t.i64()[offset]);
    } else {
      AppendFloat(t.f32()[offset], out);
    }
    return;
  }
  int64_t stride = 1;
  for (int a = axis + 1; a < t.rank(); ++a) stride *= t.dim(a);
  out->push_back('[');
  for (int64_t i = 0; i < t.dim(axis); ++i) {
    if (i > 0) out->push_back(',');
    AppendValues(t, axis + 1, offset + i * stride, out);
  }
  out->push_back(']');
}

void AppendName(const std::string& name, std::string* out) {
  out->append(Dump(Json(name)));
  out->push_back(':');
}

}  // namespace

absl::StatusOr<std::unique_ptr<JsonPredict>> DecodeJsonPredict(absl::string_view body,
                                                               const Servable& model) {
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError("JSON Parse error: the body is not valid JSON");
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError("JSON Parse error: expected an object at the top level");
  }
  auto out = std::make_unique<JsonPredict>();
  if (auto it = doc.find("signature_name"); it != doc.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError("\"signature_name\": expected a string");
    }
    out->signature_name = it->get<std::string>();
  }
  const auto instances = doc.find("instances");
  const auto inputs = doc.find("inputs");
  if ((instances == doc.end()) == (inputs == doc.end())) {
    return absl::InvalidArgumentError(
        instances == doc.end()
            ? "Missing 'inputs' or 'instances' key"
            : "Not formatted correctly expecting only one of 'inputs' or 'instances' keys "
              "exists");
  }
  out->row_format = instances != doc.end();
  absl::Status s = out->row_format ? DecodeRows(*instances, model, out.get())
                                   : DecodeColumnar(*inputs, model, out.get());
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> EncodeJsonPredict(const Servable& model, bool row_format,
                                              const std::vector<engine::Tensor>& outputs) {
  const size_t n = std::min(outputs.size(), model.outputs().size());
  std::string out;
  if (!row_format) {
    out = "{\"outputs\":";
    if (n == 1) {
      AppendValues(outputs[0], 0, 0, &out);
    } else {
      out.push_back('{');
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) out.push_back(',');
        AppendName(model.outputs()[i].name, &out);
        AppendValues(outputs[i], 0, 0, &out);
      }
      out.push_back('}');
    }
    out.push_back('}');
    return out;
  }
  int64_t rows = -1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = outputs[i].rank() > 0 ? outputs[i].dim(0) : -1;
    if (r < 0 || (rows >= 0 && r != rows)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", model.outputs()[i].name, "' has shape ", ShapeText(outputs[i].shape()),
          ", whose first axis is not the batch of the other outputs; the row format "
          "(\"instances\") cannot answer it: send \"inputs\" (the columnar format)"));
    }
    rows = r;
  }
  out = "{\"predictions\":[";
  for (int64_t r = 0; r < rows; ++r) {
    if (r > 0) out.push_back(',');
    if (n != 1) out.push_back('{');
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) out.push_back(',');
      if (n != 1) AppendName(model.outputs()[i].name, &out);
      const engine::Tensor& t = outputs[i];
      AppendValues(t, 1, r * (t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0), &out);
    }
    if (n != 1) out.push_back('}');
  }
  out.append("]}");
  return out;
}

std::string JsonError(absl::string_view message) {
  return absl::StrCat("{\"error\":", Dump(Json(std::string(message))), "}");
}

}  // namespace rnnserve::server::tfserving
