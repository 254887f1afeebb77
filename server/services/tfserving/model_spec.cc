#include "server/services/tfserving/model_spec.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/services/tfserving/tensor_proto.h"

namespace rnnserve::server::tfserving {
namespace {

namespace ts = tensorflow::serving;

void FillInfo(const TensorSignature& sig, const std::string& tensor_name,
              tensorflow::TensorInfo* info) {
  info->set_name(tensor_name);
  info->set_dtype(DataTypeOf(sig.dtype));
  SetShape(sig.shape, info->mutable_tensor_shape());
}

}  // namespace

Target TargetOf(const ts::ModelSpec& spec) {
  Target t{.name = spec.name(),
           .has_version = spec.has_version(),
           .version = spec.has_version() ? spec.version().value() : 0,
           .label = spec.version_label(),
           .signature_name = spec.signature_name()};
  return t;
}

absl::StatusOr<std::shared_ptr<const Servable>> FindModel(const ModelRepository& repository,
                                                          const Target& target) {
  if (target.name.empty()) {
    return absl::InvalidArgumentError("model_spec.name: must not be empty");
  }
  if (!target.label.empty()) {
    auto version = LabelledVersion(repository, target);
    if (!version.ok()) return version.status();
    return repository.Get(target.name, *version);
  }
  if (target.has_version && target.version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", target.name, "': version ", target.version, " must be positive"));
  }
  return repository.Get(target.name, target.has_version ? target.version : 0);
}

absl::StatusOr<int64_t> LabelledVersion(const ModelRepository& repository, const Target& target) {
  // Every version of a model shares its config.pbtxt: the newest one's has the labels.
  auto newest = repository.Get(target.name, 0);
  if (!newest.ok()) return newest.status();
  const auto& labels = (*newest)->config().version_labels();
  const auto it = labels.find(target.label);
  if (it == labels.end()) {
    std::vector<std::string> known;
    for (const auto& [label, version] : labels) known.push_back(label);
    std::sort(known.begin(), known.end());
    return absl::InvalidArgumentError(
        absl::StrCat("Unrecognized servable version label: ", target.label, " (model '",
                     target.name, "' has ", known.empty() ? "none" : absl::StrJoin(known, ", "),
                     "; labels are set by version_labels in its config.pbtxt)"));
  }
  return it->second;
}

absl::Status CheckSignature(const Servable& model, const std::string& signature_name) {
  if (signature_name.empty() || signature_name == kDefaultSignature) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "Serving signature name: \"", signature_name, "\" not found in signature def; model '",
      model.name(), "' version ", model.version(), " has \"", kDefaultSignature, "\""));
}

ts::SignatureDefMap SignatureDefsOf(const Servable& model) {
  ts::SignatureDefMap map;
  tensorflow::SignatureDef& sig = (*map.mutable_signature_def())[kDefaultSignature];
  sig.set_method_name(kPredictMethod);
  for (const TensorSignature& in : model.inputs()) {
    FillInfo(in, absl::StrCat("serving_default_", in.name, ":0"),
             &(*sig.mutable_inputs())[in.name]);
  }
  std::vector<std::string> names;
  for (const TensorSignature& out : model.outputs()) names.push_back(out.name);
  std::sort(names.begin(), names.end());
  for (const TensorSignature& out : model.outputs()) {
    const auto index = std::find(names.begin(), names.end(), out.name) - names.begin();
    FillInfo(out, absl::StrCat("StatefulPartitionedCall:", index),
             &(*sig.mutable_outputs())[out.name]);
  }
  tensorflow::SignatureDef& init = (*map.mutable_signature_def())["__saved_model_init_op"];
  tensorflow::TensorInfo& noop = (*init.mutable_outputs())["__saved_model_init_op"];
  noop.set_name("NoOp");
  noop.mutable_tensor_shape()->set_unknown_rank(true);
  return map;
}

void SetModelSpec(const Servable& model, const std::string& signature_name, ts::ModelSpec* spec) {
  spec->set_name(model.name());
  spec->mutable_version()->set_value(model.version());
  spec->set_signature_name(signature_name.empty() ? kDefaultSignature : signature_name);
}

void SetMetadataSpec(const Servable& model, ts::ModelSpec* spec) {
  spec->set_name(model.name());
  spec->mutable_version()->set_value(model.version());
}

absl::Status GetModelStatus(const ModelRepository& repository, const Target& target,
                            ts::GetModelStatusResponse* response) {
  if (target.name.empty()) return absl::InvalidArgumentError("Missing model name in request.");
  bool has_version = target.has_version;
  int64_t wanted = target.version;
  if (!target.label.empty()) {
    auto version = LabelledVersion(repository, target);
    if (!version.ok()) return version.status();
    has_version = true;
    wanted = *version;
  }
  for (const ModelState& state : repository.List()) {
    if (state.name != target.name) continue;
    const auto& v = state.versions;
    if (has_version && std::find(v.begin(), v.end(), wanted) == v.end()) {
      return absl::NotFoundError(
          absl::StrCat("Could not find version ", wanted, " of model ", target.name));
    }
    for (int64_t version : v) {
      if (has_version && version != wanted) continue;
      ts::ModelVersionStatus* s = response->add_model_version_status();
      s->set_version(version);
      s->set_state(ts::ModelVersionStatus::AVAILABLE);
      s->mutable_status()->set_error_code(tensorflow::error::OK);
    }
    if (v.empty()) {
      ts::ModelVersionStatus* s = response->add_model_version_status();
      s->set_state(ts::ModelVersionStatus::END);
      s->mutable_status()->set_error_code(tensorflow::error::UNKNOWN);
      s->mutable_status()->set_error_message(state.reason);
    }
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("Could not find any versions of model ", target.name));
}

}  // namespace rnnserve::server::tfserving
