#include "server/services/kserve/infer_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/services/kserve/datatype.h"
#include "server/stream_window.h"

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

// One KServe input as a view of its values; `raw` is its raw_input_contents entry or null.
absl::Status ToView(const ModelInferRequest::InferInputTensor& in, const std::string* raw,
                    const std::string& what, core::InputView* out) {
  auto type = ParseDatatype(in.datatype(), what);
  if (!type.ok()) return type.status();
  out->name = in.name();
  out->type = *type;
  out->shape.assign(in.shape().begin(), in.shape().end());
  if (raw != nullptr) {
    const int64_t n = ElementCount(in.shape());
    if (n >= 0 && static_cast<int64_t>(raw->size()) != n * core::ElementBytes(*type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": raw_input_contents holds ", raw->size(), " bytes; shape ", ShapeText(in.shape()),
          " of ", in.datatype(), " needs ", n * core::ElementBytes(*type)));
    }
    out->bytes = *raw;
    return absl::OkStatus();
  }
  const inference::InferTensorContents& c = in.contents();
  switch (*type) {
    case core::ElementType::kFp32:
      out->bytes = core::BytesOf(c.fp32_contents());
      break;
    case core::ElementType::kInt32:
      out->bytes = core::BytesOf(c.int_contents());
      break;
    case core::ElementType::kFp64:
      out->bytes = core::BytesOf(c.fp64_contents());
      break;
    default:
      out->bytes = core::BytesOf(c.int64_contents());
      break;
  }
  return absl::OkStatus();
}

absl::Status LengthsFromParameter(const InferParameters& parameters, core::Request* req) {
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
    req->lengths.push_back(len);
  }
  return absl::OkStatus();
}

absl::Status LengthsFromInput(const core::InputView& view, core::Request* req) {
  const std::string what = "input 'lengths'";
  if (view.type == core::ElementType::kFp32 || view.type == core::ElementType::kFp64) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": datatype ", view.type == core::ElementType::kFp32 ? "FP32" : "FP64",
                     " given, expected INT32"));
  }
  auto t = core::ToEngineTensor(view, /*token_ids=*/false, what);
  if (!t.ok()) return t.status();
  if (t->rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shape ", engine::ShapeString(t->shape()), " given, expected [batch]"));
  }
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const int64_t v = t->i64()[i];
    // The shared validation checks the range against the time axis.
    req->lengths.push_back(
        v < 0 || v > std::numeric_limits<int32_t>::max() ? -1 : static_cast<int32_t>(v));
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
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw_input_contents: ", request.raw_input_contents_size(), " entries given for ",
        request.inputs_size(), " inputs (expected one per input)"));
  }
  InferInputs given{.parameters = &request.parameters()};
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& in = request.inputs(i);
    const std::string what = absl::StrCat("input '", in.name(), "'");
    if (raw && in.has_contents()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": has contents although the request uses raw_input_contents"));
    }
    core::InputView view;
    if (auto s = ToView(in, raw ? &request.raw_input_contents(i) : nullptr, what, &view); !s.ok()) {
      return s;
    }
    given.inputs.push_back(std::move(view));
  }
  for (const auto& out : request.outputs()) {
    bool binary = true;
    auto it = out.parameters().find("binary_data");
    if (it != out.parameters().end()) {
      if (it->second.parameter_choice_case() != InferParameter::kBoolParam) {
        return absl::InvalidArgumentError(absl::StrCat("output '", out.name(),
                                                       "': parameter 'binary_data' must be a "
                                                       "bool_param"));
      }
      binary = it->second.bool_param();
    }
    given.outputs.push_back({out.name(), binary});
  }
  return DecodeViews(std::move(given), servable);
}

absl::StatusOr<DecodedInfer> DecodeViews(InferInputs given, const Servable& servable) {
  DecodedInfer decoded;
  static const InferParameters kNoParameters;
  const InferParameters& parameters =
      given.parameters != nullptr ? *given.parameters : kNoParameters;
  bool model_has_lengths_input = false;
  for (const TensorSignature& sig : servable.inputs())
    model_has_lengths_input |= sig.name == kLengths;
  int model_inputs_given = 0;
  for (const core::InputView& in : given.inputs) {
    model_inputs_given += model_has_lengths_input || in.name != kLengths;
  }

  core::Request core_request;
  bool lengths_input = false;
  for (core::InputView& view : given.inputs) {
    const std::string what = absl::StrCat("input '", view.name, "'");
    if (view.name == kLengths && !model_has_lengths_input) {
      if (auto s = LengthsFromInput(view, &core_request); !s.ok()) return s;
      lengths_input = true;
      continue;
    }
    if (const TensorSignature* sig = FindInput(servable, view.name, model_inputs_given);
        sig != nullptr && !core::Feeds(view.type, sig->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": datatype ", DatatypeName(view.type), " given, expected ",
          DatatypeName(sig->dtype),
          sig->dtype == engine::DType::kInt64 ? " or INT32 (or whole-number FP32 / FP64)" : ""));
    }
    for (const core::InputView& other : core_request.inputs) {
      if (other.name == view.name) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": given twice"));
      }
    }
    core_request.inputs.push_back(std::move(view));
  }
  if (parameters.contains(kLengths)) {
    if (lengths_input) {
      return absl::InvalidArgumentError(
          "lengths: given both as an input and as a parameter; give one");
    }
    if (auto s = LengthsFromParameter(parameters, &core_request); !s.ok()) return s;
  }

  for (const auto& out : given.outputs) core_request.output_filter.push_back(out.first);
  if (auto s = core::ValidateOutputFilter(core_request, servable.signature()); !s.ok()) return s;
  auto sequence = ParseSequence(parameters);
  if (!sequence.ok()) return sequence.status();
  // A sequence request is a stream chunk: a fixed window's time axis is free (stream_window.h).
  auto batch = sequence->has_value() ? ValidateStreamChunk(core_request, servable)
                                     : core::Validate(core_request, servable.signature());
  if (!batch.ok()) return batch.status();
  decoded.batch = std::move(*batch);

  if (given.outputs.empty()) {
    for (int i = 0; i < static_cast<int>(servable.outputs().size()); ++i) {
      decoded.outputs.push_back({.index = i, .raw = given.default_raw});
    }
  }
  for (const auto& [name, raw] : given.outputs) {
    DecodedInfer::Output o{.raw = raw};
    for (int i = 0; i < static_cast<int>(servable.outputs().size()); ++i) {
      if (servable.outputs()[i].name == name) o.index = i;
    }
    decoded.outputs.push_back(o);
  }

  auto priority = IntParam(parameters, "priority");
  if (!priority.ok()) return priority.status();
  if (priority->has_value()) {
    if (**priority > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter 'priority': ", **priority, " is out of range"));
    }
    decoded.options.priority = static_cast<int>(**priority);
  }
  auto timeout = IntParam(parameters, "timeout");
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value() && **timeout > 0) {
    decoded.options.deadline = absl::Now() + absl::Microseconds(**timeout);
  }
  decoded.sequence = std::move(*sequence);
  return decoded;
}

namespace {

// The response's outputs, in the order the request asked for them, names only; with a
// raw_output_contents entry for each when any output is raw (empty for a typed one, so that
// the entries stay aligned with the outputs). Once per response.
void Lay(const Servable& servable, const DecodedInfer& decoded,
         inference::ModelInferResponse* response) {
  if (response->outputs_size() > 0) return;
  bool any_raw = false;
  for (const auto& o : decoded.outputs) any_raw |= o.raw;
  for (const DecodedInfer::Output& o : decoded.outputs) {
    response->add_outputs()->set_name(servable.outputs()[o.index].name);
    if (any_raw) response->add_raw_output_contents();
  }
}

void Describe(const engine::Tensor& t, inference::ModelInferResponse::InferOutputTensor* out) {
  out->set_datatype(DatatypeName(t.dtype()));
  out->clear_shape();
  for (int64_t d : t.shape()) out->add_shape(d);
}

const void* Data(const engine::Tensor& t) {
  return t.dtype() == engine::DType::kFloat32 ? static_cast<const void*>(t.f32())
                                              : static_cast<const void*>(t.i64());
}

}  // namespace

OutputAllocator AllocateInfer(const Servable& servable, const DecodedInfer& decoded,
                              inference::ModelInferResponse* response) {
  return
      [&servable, &decoded, response](int index, engine::DType dtype, const engine::Shape& shape) {
        Lay(servable, decoded, response);
        for (size_t k = 0; k < decoded.outputs.size(); ++k) {
          if (decoded.outputs[k].index != index) continue;
          const int n = static_cast<int>(engine::NumElements(shape));
          const bool f32 = dtype == engine::DType::kFloat32;
          void* data = nullptr;
          if (decoded.outputs[k].raw) {
            std::string* raw = response->mutable_raw_output_contents(static_cast<int>(k));
            raw->resize(n * (f32 ? sizeof(float) : sizeof(int64_t)));
            data = raw->data();
          } else if (f32) {
            auto* c = response->mutable_outputs(static_cast<int>(k))->mutable_contents();
            c->mutable_fp32_contents()->Resize(n, 0.0f);
            data = c->mutable_fp32_contents()->mutable_data();
          } else {
            auto* c = response->mutable_outputs(static_cast<int>(k))->mutable_contents();
            c->mutable_int64_contents()->Resize(n, 0);
            data = c->mutable_int64_contents()->mutable_data();
          }
          return engine::Tensor::Wrap(dtype, shape, data, nullptr);
        }
        // Not asked for: rows of its own.
        return dtype == engine::DType::kInt64 ? engine::Tensor::Int64(shape)
                                              : engine::Tensor::Float(shape);
      };
}

void EncodeInfer(const Servable& servable, const DecodedInfer& decoded,
                 const std::vector<engine::Tensor>& outputs,
                 inference::ModelInferResponse* response) {
  Lay(servable, decoded, response);
  for (size_t k = 0; k < decoded.outputs.size(); ++k) {
    const DecodedInfer::Output& o = decoded.outputs[k];
    if (o.index >= static_cast<int>(outputs.size())) continue;  // Run fills every output
    const engine::Tensor& t = outputs[o.index];
    auto* out = response->mutable_outputs(static_cast<int>(k));
    Describe(t, out);
    const bool f32 = t.dtype() == engine::DType::kFloat32;
    const size_t bytes = t.num_elements() * (f32 ? sizeof(float) : sizeof(int64_t));
    if (o.raw) {
      std::string* raw = response->mutable_raw_output_contents(static_cast<int>(k));
      if (raw->data() != Data(t) || raw->size() != bytes) {  // else AllocateInfer's, in place
        raw->assign(static_cast<const char*>(Data(t)), bytes);
      }
      continue;
    }
    auto* c = out->mutable_contents();
    if (f32 && (c->fp32_contents().data() != t.f32() || t.num_elements() == 0)) {
      c->clear_fp32_contents();
      c->mutable_fp32_contents()->Add(t.f32(), t.f32() + t.num_elements());
    } else if (!f32 && (c->int64_contents().data() != t.i64() || t.num_elements() == 0)) {
      c->clear_int64_contents();
      c->mutable_int64_contents()->Add(t.i64(), t.i64() + t.num_elements());
    }
  }
}

}  // namespace rnnserve::server::kserve
