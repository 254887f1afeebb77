#include "models/model_loader.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_h5.h"
#include "models/keras/keras_zip.h"
#include "models/onnx/onnx_model.h"
#include "models/savedmodel/savedmodel.h"

namespace rnnserve::models {
namespace {

std::string FormatOf(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".h5" || ext == ".hdf5") return "keras_h5";
  if (ext == ".keras") return "keras";
  if (ext == ".onnx") return "onnx";
  if (savedmodel::IsSavedModelPath(path)) return "tf_savedmodel";
  return "";
}

}  // namespace

bool IsModelFile(const std::string& path) { return !FormatOf(path).empty(); }

absl::StatusOr<engine::Model> LoadModelFile(const std::string& path, const LoadOptions& options) {
  std::string format = options.format.empty() ? FormatOf(path) : options.format;
  if (format == "tensorflow_savedmodel") format = "tf_savedmodel";  // Triton's platform name
  absl::StatusOr<engine::Model> model;
  if (format == "keras_h5") {
    model = keras::LoadKerasH5(path, options);
  } else if (format == "keras") {
    model = keras::LoadKerasZip(path, options);
  } else if (format == "onnx") {
    model = onnx::LoadOnnxFile(path);
  } else if (format == "tf_savedmodel") {
    model = savedmodel::LoadSavedModel(path);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": unknown model format '", format,
        "' (expected .h5/.hdf5 Keras files, .keras, .onnx or a SavedModel directory)"));
  }
  if (!model.ok()) return model.status();
  if (auto s = model->Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return model;
}

}  // namespace rnnserve::models
