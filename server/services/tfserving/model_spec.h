#pragma once

// What TF Serving's two front ends (gRPC and REST) share: which model version a request names,
// the one signature a model has, its SignatureDef, and its versions' status.
//
// Names, as TF Serving shows them for a Keras model saved with model.save(dir):
//   - one signature, "serving_default" (an empty signature_name means it too);
//   - inputs keyed by the model's input names (a Keras input layer's name: "lstm_input" for a
//     Sequential model whose first layer is "lstm", the InputLayer's name otherwise); each
//     TensorInfo's name is "serving_default_<input>:0";
//   - outputs keyed by the model's output names (the output layer's name); TensorInfo names
//     "StatefulPartitionedCall:<i>", i counting the outputs in sorted order, as TensorFlow
//     flattens the signature's output dict;
//   - method_name "tensorflow/serving/predict"; SavedModels' "__saved_model_init_op" entry is
//     listed beside it, as TF Serving lists it.
// Dimensions that vary (the batch, a free sequence length) are -1.
//
// Version labels come from the model's config.pbtxt (`version_labels { key: "stable" value: 1 }`,
// TF Serving's syntax); a label it does not set is INVALID_ARGUMENT, as in TF Serving, and a
// label whose version is not loaded NOT_FOUND.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model_repository.h"
#include "server/servable.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"
#include "tensorflow_serving/apis/model.pb.h"

namespace rnnserve::server::tfserving {

inline constexpr char kDefaultSignature[] = "serving_default";
inline constexpr char kPredictMethod[] = "tensorflow/serving/predict";

// A model version as a request names it (ModelSpec, or a REST path).
struct Target {
  std::string name;
  bool has_version = false;
  int64_t version = 0;  // with has_version
  std::string label;    // a version label; empty: none
  std::string signature_name;
};

Target TargetOf(const tensorflow::serving::ModelSpec& spec);

// The version `target` names (the newest loaded one when it names none). NOT_FOUND naming
// what is loaded; INVALID_ARGUMENT for an empty name or an unknown label.
absl::StatusOr<std::shared_ptr<const Servable>> FindModel(const ModelRepository& repository,
                                                          const Target& target);

// The version number `target.label` names in the model's config.pbtxt; INVALID_ARGUMENT for a
// label it does not set, NOT_FOUND for an unknown model.
absl::StatusOr<int64_t> LabelledVersion(const ModelRepository& repository, const Target& target);

// OK for "" and "serving_default"; otherwise INVALID_ARGUMENT naming the signatures there are.
absl::Status CheckSignature(const Servable& model, const std::string& signature_name);

// The model's signatures as GetModelMetadata's "signature_def" field holds them.
tensorflow::serving::SignatureDefMap SignatureDefsOf(const Servable& model);

// The model spec a Predict answer carries: name, version, the signature that ran
// ("serving_default" for an empty `signature_name`).
void SetModelSpec(const Servable& model, const std::string& signature_name,
                  tensorflow::serving::ModelSpec* spec);
// The model spec GetModelMetadata answers: name and version; no signature name, as in TF
// Serving (the metadata lists every signature).
void SetMetadataSpec(const Servable& model, tensorflow::serving::ModelSpec* spec);

// GetModelStatus: every loaded version of `target.name` (or the one it names) AVAILABLE; a
// model that failed to load gives one entry, END, with its error. NOT_FOUND as TF Serving
// words it.
absl::Status GetModelStatus(const ModelRepository& repository, const Target& target,
                            tensorflow::serving::GetModelStatusResponse* response);

}  // namespace rnnserve::server::tfserving
