// The one edge validation (request.h): a Request against a model's signature.

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/lengths.h"
#include "server/core/request.h"

namespace rnnserve::server::core {
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

const InputView* Find(const std::vector<InputView>& given, const std::string& name) {
  for (const InputView& v : given) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

absl::Status DecodeStates(const Request& request, const Signature& signature, int64_t B,
                          engine::Batch* batch) {
  // A model that accepts finite inputs only (reject_non_finite on any input) takes finite
  // initial states only: a NaN state is as poisonous as a NaN input.
  bool finite_only = false;
  for (const TensorSignature& sig : signature.inputs) finite_only |= sig.reject_non_finite;
  for (const auto& [layer, states] : request.initial_states) {
    if (!signature.is_recurrent_layer(layer)) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial_states: '", layer, "' is not a recurrent layer of the model"));
    }
    std::vector<engine::Tensor>& out = batch->initial_states[layer];
    for (size_t i = 0; i < states.size(); ++i) {
      const std::string what = absl::StrCat("initial_states '", layer, "'[", i, "]");
      auto t = ToEngineTensor(states[i], /*token_ids=*/false, what);
      if (!t.ok()) return t.status();
      if (t->dtype() != engine::DType::kFloat32 || t->rank() != 2 || t->dim(0) != B) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": shape ",
                                                       engine::ShapeString(t->shape()),
                                                       " given, expected FP32 [", B, ", units]"));
      }
      if (finite_only) {
        if (absl::Status f = CheckFinite(*t, what); !f.ok()) return f;
      }
      out.push_back(std::move(*t));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<engine::Batch> Validate(const Request& request, const Signature& signature) {
  const std::vector<TensorSignature>& sigs = signature.inputs;
  const std::vector<InputView>& given = request.inputs;
  const bool any_name = sigs.size() == 1 && given.size() == 1;
  for (const InputView& v : given) {
    const bool known = std::any_of(sigs.begin(), sigs.end(),
                                   [&](const TensorSignature& s) { return s.name == v.name; });
    if (!known && !any_name) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input '", v.name, "' (model inputs: ", Names(sigs), ")"));
    }
  }
  engine::Batch batch;
  int64_t B = -1, T = -1;
  for (const TensorSignature& sig : sigs) {
    const InputView* in = Find(given, sig.name);
    if (in == nullptr && any_name) in = &given[0];
    if (in == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", sig.name, "' (model inputs: ", Names(sigs), ")"));
    }
    const std::string what = absl::StrCat("input '", sig.name, "'");
    const bool ids = sig.dtype == engine::DType::kInt64;
    if (!Feeds(in->type, sig.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dtype ", ElementTypeName(in->type), " given, expected ",
                       ElementTypeName(ids ? ElementType::kInt64 : ElementType::kFp32),
                       ids ? " or TYPE_INT32 (or whole-number TYPE_FP32 / TYPE_FP64)" : ""));
    }
    auto tensor = ToEngineTensor(*in, ids, what);
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
  if (!request.lengths.empty() && signature.lengths != nullptr) {
    // Refused at the edge by a model that cannot honour lengths (the reason names the layer);
    // otherwise they describe its sequence inputs, [B, T, ...] or time-major [T, B, ...].
    const LengthsSupport& support = *signature.lengths;
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
  if (auto st = engine::CheckLengths(request.lengths, B, T); !st.ok()) return st;
  batch.lengths = request.lengths;
  if (auto s = DecodeStates(request, signature, B, &batch); !s.ok()) return s;
  return batch;
}

absl::Status ValidateOutputFilter(const Request& request, const Signature& signature) {
  for (const std::string& name : request.output_filter) {
    const bool known = std::any_of(signature.outputs.begin(), signature.outputs.end(),
                                   [&](const TensorSignature& s) { return s.name == name; });
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("output_filter: unknown output '", name,
                                                     "' (model outputs: ", Names(signature.outputs),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server::core
