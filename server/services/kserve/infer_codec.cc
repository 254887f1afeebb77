#include "server/services/kserve/infer_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/request_validation.h"
#include "server/services/kserve/datatype.h"
#include "server/stream_window.h"
#include "server/tensor_codec.h"

namespace rnnserve::server::kserve {
namespace {

using inference::InferParameter;
using inference::ModelInferRequest;

constexpr char kLengths[] = "lengths";

absl::StatusOr<std::optional<int64_t>> IntParam(const InferParameters& parameters,
                                                const std::string& name) {
  auto it = parameters.find(name);
  if (it == parameters.end()) return std::nullopt;
  const InferParameter& p = it->second;
  if (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() >= 0) {
    return p.int64_param();
  }
  if (p.parameter_choice_case() == InferParameter::kUint64Param &&
      p.uint64_param() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(p.uint64_param());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", name, "': must be a non-negative int64_param or uint64_param"));
}

// Elements in `shape`, or -1 when an axis is negative or the count is absurd (the shared
// validation reports those).
int64_t ElementCount(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& shape) {
  return engine::ShapeString(engine::Shape(shape.begin(), shape.end()));
}

// One KServe input as an rnnserve.v1 tensor; `raw` is its raw_input_contents entry or null.
absl::Status ToWireTensor(const ModelInferRequest::InferInputTensor& in, const std::string* raw,
                          const std::string& what, v1::Tensor* out) {
  auto type = ParseDatatype(in.datatype(), what);
  if (!type.ok()) return type.status();
  out->set_dtype(*type);
  out->mutable_shape()->CopyFrom(in.shape());
  if (raw != nullptr) {
    const int64_t n = ElementCount(in.shape());
    if (n >= 0 && static_cast<int64_t>(raw->size()) != n * ElementBytes(*type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": raw_input_contents holds ", raw->size(), " bytes; shape ", ShapeText(in.shape()),
          " of ", in.datatype(), " needs ", n * ElementBytes(*type)));
    }
    out->set_raw_content(*raw);
    return absl::OkStatus();
  }
  const inference::InferTensorContents& c = in.contents();
  switch (*type) {
    case v1::TYPE_FP32:
      out->mutable_float_val()->CopyFrom(c.fp32_contents());
      break;
    case v1::TYPE_INT32:
      out->mutable_int_val()->CopyFrom(c.int_contents());
      break;
    case v1::TYPE_FP64:
      out->mutable_double_val()->CopyFrom(c.fp64_contents());
      break;
    default:
      out->mutable_int64_val()->CopyFrom(c.int64_contents());
      break;
  }
  return absl::OkStatus();
}

absl::Status LengthsFromParameter(const InferParameters& parameters, v1::PredictRequest* req) {
  auto it = parameters.find(kLengths);
  if (it == parameters.end()) return absl::OkStatus();
  if (it->second.parameter_choice_case() != InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        "parameter 'lengths': must be a string_param of comma-separated lengths (\"40,25,12\")");
  }
  for (absl::string_view part : absl::StrSplit(it->second.string_param(), ',')) {
    int32_t len = 0;
    if (!absl::SimpleAtoi(part, &len)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter 'lengths': '", part, "' is not an integer (expected e.g. \"40,25,12\")"));
    }
    req->add_lengths(len);
  }
  return absl::OkStatus();
}

absl::Status LengthsFromInput(const v1::Tensor& wire, v1::PredictRequest* req) {
  const std::string what = "input 'lengths'";
  if (wire.dtype() == v1::TYPE_FP32 || wire.dtype() == v1::TYPE_FP64) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": datatype ",
                                                   wire.dtype() == v1::TYPE_FP32 ? "FP32" : "FP64",
                                                   " given, expected INT32"));
  }
  auto t = DecodeTensor(wire, what);
  if (!t.ok()) return t.status();
  if (t->rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shape ", engine::ShapeString(t->shape()), " given, expected [batch]"));
  }
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const int64_t v = t->i64()[i];
    // The shared validation checks the range against the time axis.
    req->add_lengths(v < 0 || v > std::numeric_limits<int32_t>::max() ? -1
                                                                      : static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

const TensorSignature* FindInput(const Servable& servable, const std::string& name,
                                 int model_inputs_given) {
  for (const TensorSignature& sig : servable.inputs()) {
    if (sig.name == name) return &sig;
  }
  // The shared validation lets a single-input model take its one input under any name.
  if (servable.inputs().size() == 1 && model_inputs_given == 1) return &servable.inputs()[0];
  return nullptr;
}

}  // namespace

absl::StatusOr<DecodedInfer> DecodeInfer(const ModelInferRequest& request,
                                         const Servable& servable) {
  DecodedInfer decoded;
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw_input_contents: ", request.raw_input_contents_size(), " entries given for ",
        request.inputs_size(), " inputs (expected one per input)"));
  }
  bool model_has_lengths_input = false;
  for (const TensorSignature& sig : servable.inputs())
    model_has_lengths_input |= sig.name == kLengths;
  int model_inputs_given = 0;
  for (const auto& in : request.inputs()) {
    model_inputs_given += model_has_lengths_input || in.name() != kLengths;
  }

  v1::PredictRequest predict;
  bool lengths_input = false;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& in = request.inputs(i);
    const std::string what = absl::StrCat("input '", in.name(), "'");
    if (raw && in.has_contents()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": has contents although the request uses raw_input_contents"));
    }
    v1::Tensor wire;
    if (auto s = ToWireTensor(in, raw ? &request.raw_input_contents(i) : nullptr, what, &wire);
        !s.ok()) {
      return s;
    }
    if (in.name() == kLengths && !model_has_lengths_input) {
      if (auto s = LengthsFromInput(wire, &predict); !s.ok()) return s;
      lengths_input = true;
      continue;
    }
    if (const TensorSignature* sig = FindInput(servable, in.name(), model_inputs_given);
        sig != nullptr && !Feeds(wire.dtype(), sig->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": datatype ", in.datatype(), " given, expected ", DatatypeName(sig->dtype),
          sig->dtype == engine::DType::kInt64 ? " or INT32 (or whole-number FP32 / FP64)" : ""));
    }
    if (predict.inputs().contains(in.name())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": given twice"));
    }
    (*predict.mutable_inputs())[in.name()] = std::move(wire);
  }
  if (request.parameters().contains(kLengths)) {
    if (lengths_input) {
      return absl::InvalidArgumentError(
          "lengths: given both as an input and as a parameter; give one");
    }
    if (auto s = LengthsFromParameter(request.parameters(), &predict); !s.ok()) return s;
  }

  for (const auto& out : request.outputs()) predict.add_output_filter(out.name());
  if (auto s = ValidateOutputFilter(predict, servable); !s.ok()) return s;
  auto sequence = ParseSequence(request.parameters());
  if (!sequence.ok()) return sequence.status();
  // A sequence request is a stream chunk: a fixed window's time axis is free (stream_window.h).
  auto batch = sequence->has_value()
                   ? ValidatePredict(predict, servable, StreamSignatureOf(servable).inputs)
                   : ValidatePredict(predict, servable);
  if (!batch.ok()) return batch.status();
  decoded.batch = std::move(*batch);

  if (request.outputs().empty()) {
    for (int i = 0; i < static_cast<int>(servable.outputs().size()); ++i) {
      decoded.outputs.push_back({.index = i, .raw = true});
    }
  }
  for (const auto& out : request.outputs()) {
    DecodedInfer::Output o;
    for (int i = 0; i < static_cast<int>(servable.outputs().size()); ++i) {
      if (servable.outputs()[i].name == out.name()) o.index = i;
    }
    auto it = out.parameters().find("binary_data");
    if (it != out.parameters().end()) {
      if (it->second.parameter_choice_case() != InferParameter::kBoolParam) {
        return absl::InvalidArgumentError(absl::StrCat("output '", out.name(),
                                                       "': parameter 'binary_data' must be a "
                                                       "bool_param"));
      }
      o.raw = it->second.bool_param();
    }
    decoded.outputs.push_back(o);
  }

  auto priority = IntParam(request.parameters(), "priority");
  if (!priority.ok()) return priority.status();
  if (priority->has_value()) {
    if (**priority > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter 'priority': ", **priority, " is out of range"));
    }
    decoded.options.priority = static_cast<int>(**priority);
  }
  auto timeout = IntParam(request.parameters(), "timeout");
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value() && **timeout > 0) {
    decoded.options.deadline = absl::Now() + absl::Microseconds(**timeout);
  }
  decoded.sequence = std::move(*sequence);
  return decoded;
}

void EncodeInfer(const Servable& servable, const DecodedInfer& decoded,
                 const std::vector<engine::Tensor>& outputs,
                 inference::ModelInferResponse* response) {
  bool any_raw = false;
  for (const auto& o : decoded.outputs) any_raw |= o.raw;
  for (const DecodedInfer::Output& o : decoded.outputs) {
    if (o.index >= static_cast<int>(outputs.size())) continue;  // Run fills every output
    const engine::Tensor& t = outputs[o.index];
    auto* out = response->add_outputs();
    out->set_name(servable.outputs()[o.index].name);
    out->set_datatype(DatatypeName(t.dtype()));
    for (int64_t d : t.shape()) out->add_shape(d);
    const bool f32 = t.dtype() == engine::DType::kFloat32;
    if (o.raw) {
      const char* data =
          f32 ? reinterpret_cast<const char*>(t.f32()) : reinterpret_cast<const char*>(t.i64());
      response->add_raw_output_contents()->assign(
          data, t.num_elements() * (f32 ? sizeof(float) : sizeof(int64_t)));
      continue;
    }
    // raw_output_contents stays aligned with outputs: an empty entry for a typed output.
    if (any_raw) response->add_raw_output_contents();
    if (f32) {
      out->mutable_contents()->mutable_fp32_contents()->Add(t.f32(), t.f32() + t.num_elements());
    } else {
      out->mutable_contents()->mutable_int64_contents()->Add(t.i64(), t.i64() + t.num_elements());
    }
  }
}

}  // namespace rnnserve::server::kserve
