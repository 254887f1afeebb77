#include "server/request_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/lengths.h"
#include "server/tensor_codec.h"

namespace rnnserve::server {
namespace {

std::string Names(const std::vector<TensorSignature>& sigs) {
  return absl::StrJoin(sigs, ", ",
                       [](std::string* out, const TensorSignature& s) { out->append(s.name); });
}

absl::Status CheckShape(const engine::Tensor& t, const TensorSignature& sig) {
  auto error = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", sig.name, "': shape ", engine::ShapeString(t.shape()),
                     " given, expected ", engine::ShapeString(sig.shape)));
  };
  if (t.rank() != static_cast<int>(sig.shape.size())) return error();
  for (int d = 0; d < t.rank(); ++d) {
    if (sig.shape[d] >= 0 && t.dim(d) != sig.shape[d]) return error();
  }
  if (t.dim(sig.batch_axis) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("input '", sig.name, "': empty batch (shape ",
                                                   engine::ShapeString(t.shape()), ")"));
  }
  for (int d = 0; d < t.rank(); ++d) {
    if (d != sig.batch_axis && t.dim(d) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", sig.name, "': axis ", d,
                                                     " is empty (shape ",
                                                     engine::ShapeString(t.shape()), ")"));
    }
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming the first NaN or infinity of an FP32 tensor.
absl::Status CheckFinite(const engine::Tensor& t, absl::string_view what) {
  if (t.dtype() != engine::DType::kFloat32) return absl::OkStatus();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (!std::isfinite(t.f32()[i])) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": value ", i, " is ", t.f32()[i],
                                                     "; this model accepts finite values only"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<engine::Batch> ValidatePredict(const v1::PredictRequest& request,
                                              const Servable& servable) {
  return ValidatePredict(request, servable, servable.inputs());
}

absl::StatusOr<engine::Batch> ValidatePredict(const v1::PredictRequest& request,
                                              const Servable& servable,
                                              const std::vector<TensorSignature>& sigs) {
  const auto& given = request.inputs();
  for (const auto& [name, tensor] : given) {
    bool known = false;
    for (const auto& s : sigs) known |= s.name == name;
    if (!known && !(sigs.size() == 1 && given.size() == 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input '", name, "' (model inputs: ", Names(sigs), ")"));
    }
  }
  engine::Batch batch;
  int64_t B = -1, T = -1;
  for (const TensorSignature& sig : sigs) {
    auto it = given.find(sig.name);
    if (it == given.end() && sigs.size() == 1 && given.size() == 1) it = given.begin();
    if (it == given.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", sig.name, "' (model inputs: ", Names(sigs), ")"));
    }
    const std::string what = absl::StrCat("input '", sig.name, "'");
    const v1::DataType want = WireType(sig.dtype);
    const v1::DataType got = it->second.dtype();
    const bool ids = sig.dtype == engine::DType::kInt64;
    const bool dtype_ok = ids ? (got == v1::TYPE_INT32 || got == v1::TYPE_INT64 ||
                                 got == v1::TYPE_FP32 || got == v1::TYPE_FP64)
                              : got == v1::TYPE_FP32;
    if (!dtype_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dtype ", v1::DataType_Name(got), " given, expected ", v1::DataType_Name(want),
          ids ? " or TYPE_INT32 (or whole-number TYPE_FP32 / TYPE_FP64)" : ""));
    }
    auto tensor = ids ? DecodeTokenIds(it->second, what) : DecodeTensor(it->second, what);
    if (!tensor.ok()) return tensor.status();
    if (auto s = CheckShape(*tensor, sig); !s.ok()) return s;
    // The batch is on the input's batch_axis (axis 1 of an ONNX state [layers, batch, H]).
    const int64_t rows = tensor->dim(sig.batch_axis);
    if (B >= 0 && rows != B) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": batch size ", rows, " (axis ",
                                                     sig.batch_axis,
                                                     ") differs from the other inputs' ", B));
    }
    B = rows;
    if (sig.batch_axis == 0 && tensor->rank() >= 2) T = std::max(T, tensor->dim(1));
    if (sig.reject_non_finite) {
      if (absl::Status f = CheckFinite(*tensor, what); !f.ok()) return f;
    }
    batch.inputs.push_back(std::move(*tensor));
  }
  if (!request.lengths().empty()) {
    // Refused at the edge by a model that cannot honour lengths (the reason names the layer);
    // otherwise they describe its sequence inputs, [B, T, ...] or time-major [T, B, ...].
    const Servable::LengthsSupport& support = servable.lengths();
    if (!support.honored.ok()) return support.honored;
    T = -1;
    for (size_t i = 0; i < batch.inputs.size() && i < support.sequence_inputs.size(); ++i) {
      if (!support.sequence_inputs[i]) continue;
      const engine::Tensor& t = batch.inputs[i];
      B = t.dim(support.time_major ? 1 : 0);
      T = std::max(T, t.dim(support.time_major ? 0 : 1));
    }
  }
  // The engines' rule (engine/lengths.h): B lengths, each in [0, T]; 0 is an empty sequence.
  if (auto st = engine::CheckLengths(request.lengths(), B, T); !st.ok()) return st;
  batch.lengths.assign(request.lengths().begin(), request.lengths().end());
  // A model that accepts finite inputs only (reject_non_finite on any input) takes finite
  // initial states only: a NaN state is as poisonous as a NaN input.
  bool finite_only = false;
  for (const TensorSignature& sig : sigs) finite_only |= sig.reject_non_finite;
  for (const auto& [layer, states] : request.initial_states()) {
    if (!servable.HasRecurrentLayer(layer)) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial_states: '", layer, "' is not a recurrent layer of the model"));
    }
    std::vector<engine::Tensor>& out = batch.initial_states[layer];
    for (int i = 0; i < states.states_size(); ++i) {
      auto t =
          DecodeTensor(states.states(i), absl::StrCat("initial_states '", layer, "'[", i, "]"));
      if (!t.ok()) return t.status();
      if (t->dtype() != engine::DType::kFloat32 || t->rank() != 2 || t->dim(0) != B) {
        return absl::InvalidArgumentError(absl::StrCat("initial_states '", layer, "'[", i,
                                                       "]: shape ", engine::ShapeString(t->shape()),
                                                       " given, expected FP32 [", B, ", units]"));
      }
      if (finite_only) {
        if (absl::Status f = CheckFinite(*t, absl::StrCat("initial_states '", layer, "'[", i, "]"));
            !f.ok()) {
          return f;
        }
      }
      out.push_back(std::move(*t));
    }
  }
  return batch;
}

absl::Status ValidateOutputFilter(const v1::PredictRequest& request, const Servable& servable) {
  for (const std::string& name : request.output_filter()) {
    bool known = false;
    for (const auto& s : servable.outputs()) known |= s.name == name;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_filter: unknown output '", name,
                       "' (model outputs: ", Names(servable.outputs()), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
