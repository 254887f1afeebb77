#include "models/keras/keras_h5.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "models/keras/hdf5_file.h"
#include "models/keras/keras_config.h"
#include "models/keras/keras_zip.h"

namespace rnnserve::models::keras {
namespace {

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON: ", e.what()));
  }
}

absl::StatusOr<engine::Model> LoadOpened(const absl::StatusOr<Hdf5File>& file,
                                         const LoadOptions& options) {
  if (!file.ok()) return file.status();
  const std::string& path = file->path();

  nlohmann::json config;
  if (!options.architecture_json_path.empty()) {
    std::ifstream in(options.architecture_json_path);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat(options.architecture_json_path, ": cannot read the architecture JSON"));
    }
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = ParseJson(text.str(), options.architecture_json_path);
    if (!parsed.ok()) return parsed.status();
    config = std::move(*parsed);
  } else {
    auto text = file->ReadString("/", "model_config");
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": no model_config attribute (a weights-only file? set architecture_file in "
                       "config.pbtxt to the model's JSON)"));
    }
    auto parsed = ParseJson(*text, absl::StrCat(path, ": model_config"));
    if (!parsed.ok()) return parsed.status();
    config = std::move(*parsed);
  }

  KerasSource source{.file = path, .format = "keras_h5", .keras_version = "2"};
  if (auto v = file->ReadString("/", "keras_version"); v.ok()) source.keras_version = *v;
  const Hdf5File& f = *file;

  // Keras 3 save_weights (`.weights.h5`): layers/<name>/vars/<i>, no weight_names attributes.
  if (!f.Exists("/model_weights") && f.IsGroup("/layers") && !f.HasAttribute("/", "layer_names")) {
    static const std::string kKeras3 = "3";  // only Keras 3 writes this layout
    if (!file->HasAttribute("/", "keras_version")) source.keras_version = kKeras3;
    auto weights = Keras3Weights(f, config);
    if (!weights.ok()) return weights.status();
    return BuildModel(config, source, *weights);
  }

  // A full model keeps its weights under /model_weights; save_weights writes them at the root.
  const std::string root = file->Exists("/model_weights") ? "/model_weights" : "";
  WeightSource weights = [&f,
                          &root](const std::string& layer) -> absl::StatusOr<std::vector<Array>> {
    const std::string group = absl::StrCat(root, "/", layer);
    std::vector<Array> arrays;
    if (!f.Exists(group) || !f.HasAttribute(group, "weight_names")) return arrays;
    auto names = f.ReadStrings(group, "weight_names");
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      auto array = f.ReadArray(absl::StrCat(group, "/", name));
      if (!array.ok()) return array.status();
      arrays.push_back(std::move(*array));
    }
    return arrays;
  };
  return BuildModel(config, source, weights);
}

}  // namespace

absl::StatusOr<engine::Model> LoadKerasH5(const std::string& path, const LoadOptions& options) {
  return LoadOpened(Hdf5File::Open(path), options);
}

absl::StatusOr<engine::Model> LoadKerasH5Bytes(const std::string& bytes, const std::string& name,
                                               const LoadOptions& options) {
  return LoadOpened(Hdf5File::OpenImage(bytes, name), options);
}

}  // namespace rnnserve::models::keras
