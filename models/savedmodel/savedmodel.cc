#include "models/savedmodel/savedmodel.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/savedmodel/savedmodel_internal.h"

namespace rnnserve::models::savedmodel {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxSavedModelBytes = int64_t{1} << 30;
constexpr char kServingSignature[] = "serving_default";

const MetaGraphDef* ServeGraph(const SavedModel& sm) {
  for (const MetaGraphDef& mg : sm.meta_graphs()) {
    for (const std::string& tag : mg.meta_info_def().tags()) {
      if (tag == "serve") return &mg;
    }
  }
  return sm.meta_graphs_size() == 1 ? &sm.meta_graphs(0) : nullptr;
}

// Names the model's inputs and outputs after the signature's keys, where they correspond.
absl::Status ApplySignatureNames(const std::string& dir, const SignatureDef& sig,
                                 engine::Model* model) {
  auto rename = [&dir](const auto& keys, std::vector<engine::ValueInfo>* values,
                       const char* what) -> absl::Status {
    std::set<std::string> ours;
    for (const engine::ValueInfo& v : *values) ours.insert(v.name);
    std::set<std::string> theirs;
    for (const auto& [key, info] : keys) theirs.insert(key);
    if (ours == theirs) return absl::OkStatus();
    if (values->size() == 1 && theirs.size() == 1) {
      (*values)[0].name = *theirs.begin();
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the serving signature's ", what, " (", absl::StrJoin(theirs, ", "),
                     ") do not match the Keras model's (", absl::StrJoin(ours, ", "), ")"));
  };
  if (auto s = rename(sig.inputs(), &model->inputs, "inputs"); !s.ok()) return s;
  return rename(sig.outputs(), &model->outputs, "outputs");
}

absl::Status NoSignature(const std::string& pb_path, const MetaGraphDef& mg) {
  std::vector<std::string> names;
  for (const auto& [name, sig] : mg.signature_def()) names.push_back(name);
  return absl::InvalidArgumentError(
      absl::StrCat(pb_path, ": no '", kServingSignature,
                   "' signature (it has: ", names.empty() ? "none" : absl::StrJoin(names, ", "),
                   "); save the model with its default serving signature"));
}

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", ec.message()));
  if (size > static_cast<uint64_t>(max_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes, more than the ", max_bytes, " allowed"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return bytes.str();
}

bool IsSavedModelPath(const std::string& path) {
  std::error_code ec;
  if (fs::path(path).filename() == "saved_model.pb") return true;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "saved_model.pb", ec);
}

absl::StatusOr<engine::Model> LoadSavedModel(const std::string& path) {
  const std::string dir =
      fs::path(path).filename() == "saved_model.pb" ? fs::path(path).parent_path().string() : path;
  const std::string pb_path = (fs::path(dir) / "saved_model.pb").string();
  auto bytes = ReadFileBytes(pb_path, kMaxSavedModelBytes);
  if (!bytes.ok()) return bytes.status();
  return LoadSavedModelBytes(dir, *bytes);
}

absl::StatusOr<engine::Model> LoadSavedModelBytes(const std::string& dir,
                                                  const std::string& saved_model_pb) {
  const std::string pb_path = (fs::path(dir) / "saved_model.pb").string();
  SavedModel sm;
  if (!sm.ParseFromString(saved_model_pb)) {
    return absl::InvalidArgumentError(absl::StrCat(
        pb_path, ": does not parse as a SavedModel (truncated or not a saved_model.pb)"));
  }
  const MetaGraphDef* mg = ServeGraph(sm);
  if (!mg) {
    return absl::InvalidArgumentError(
        absl::StrCat(pb_path, ": no meta graph tagged 'serve' (", sm.meta_graphs_size(),
                     " meta graphs; truncated, or not saved for serving)"));
  }
  auto sig_it = mg->signature_def().find(kServingSignature);
  const SignatureDef* signature = sig_it == mg->signature_def().end() ? nullptr : &sig_it->second;
  const std::string metadata_path = (fs::path(dir) / "keras_metadata.pb").string();
  auto metadata = ReadFileBytes(metadata_path, kMaxSavedModelBytes);
  if (!metadata.ok()) {
    if (!absl::IsNotFound(metadata.status())) return metadata.status();
    if (!signature) return NoSignature(pb_path, *mg);
    auto model = LoadGraphSavedModel(dir, *mg, *signature);
    if (!model.ok()) return model.status();
    if (auto s = ApplySignatureNames(dir, *signature, &*model); !s.ok()) return s;
    return model;
  }
  auto model = LoadKerasSavedModel(dir, *metadata);
  if (!model.ok()) return model.status();
  // A model saved with save_traces=False has no signature: the Keras names stand.
  if (signature) {
    if (auto s = ApplySignatureNames(dir, *signature, &*model); !s.ok()) return s;
  }
  return model;
}

absl::StatusOr<std::optional<std::string>> ReadKerasTrainingConfig(const std::string& path) {
  const std::string dir =
      fs::path(path).filename() == "saved_model.pb" ? fs::path(path).parent_path().string() : path;
  const std::string metadata_path = (fs::path(dir) / "keras_metadata.pb").string();
  auto bytes = ReadFileBytes(metadata_path, kMaxSavedModelBytes);
  if (absl::IsNotFound(bytes.status())) return std::optional<std::string>();
  if (!bytes.ok()) return bytes.status();
  auto root_text = KerasRootMetadata(*bytes, metadata_path);
  if (!root_text.ok()) return root_text.status();
  const nlohmann::json root = nlohmann::json::parse(*root_text, nullptr, false);
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(metadata_path, ": the root is not JSON"));
  }
  auto it = root.find("training_config");
  if (it == root.end() || !it->is_object()) return std::optional<std::string>();
  return std::optional<std::string>(it->dump());
}

}  // namespace rnnserve::models::savedmodel
