#include "models/training_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "models/keras/hdf5_file.h"
#include "models/keras/keras_zip.h"
#include "models/savedmodel/savedmodel.h"

namespace rnnserve::models {
namespace {

using Json = nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Keras 3 serializes a plain function as {"class_name": "function", "config": "<name>"}.
bool IsSerializedFunction(const Json& node) {
  return node.is_object() && node.value("class_name", Json()) == "function" &&
         node.contains("config") && node["config"].is_string();
}

// A serialized object's config ({"module", "class_name", "config", ...}), {} when absent.
const Json& ObjectConfig(const Json& node) {
  static const Json kEmpty = Json::object();
  auto it = node.find("config");
  return it != node.end() && it->is_object() ? *it : kEmpty;
}

void AddMetrics(const Json& node, bool weighted, std::vector<MetricConfig>* out) {
  if (node.is_null()) return;
  if (node.is_array()) {
    for (const Json& item : node) AddMetrics(item, weighted, out);
    return;
  }
  if (IsSerializedFunction(node)) {  // Keras 3: a metric function, e.g. keras.metrics.mae
    out->push_back({node["config"].get<std::string>(), "", weighted});
    return;
  }
  if (node.is_object() && node.contains("class_name")) {
    const Json& cfg = ObjectConfig(node);
    MetricConfig m;
    m.name = cfg.value("name", node["class_name"].get<std::string>());
    m.fn = cfg.contains("fn") && cfg["fn"].is_string() ? cfg["fn"].get<std::string>() : "";
    const std::string cls = node["class_name"].get<std::string>();
    if (m.fn.empty() && cls != "MeanMetricWrapper") m.fn = cls;  // e.g. RootMeanSquaredError
    m.weighted = weighted;
    out->push_back(std::move(m));
    return;
  }
  if (node.is_object()) {  // {"output_name": [...]} for multi-output models
    for (const auto& [k, v] : node.items()) AddMetrics(v, weighted, out);
    return;
  }
  if (node.is_string()) out->push_back({node.get<std::string>(), "", weighted});
}

}  // namespace

std::string CanonicalLossName(const std::string& name) {
  const std::string n = Lower(name);
  if (n == "mse" || n == "mean_squared_error" || n == "meansquarederror") return "mse";
  if (n == "mae" || n == "mean_absolute_error" || n == "meanabsoluteerror") return "mae";
  if (n == "mape" || n == "mean_absolute_percentage_error" || n == "meanabsolutepercentageerror")
    return "mape";
  if (n == "msle" || n == "mean_squared_logarithmic_error" || n == "meansquaredlogarithmicerror")
    return "msle";
  if (n == "huber" || n == "huber_loss") return "huber";
  if (n == "log_cosh" || n == "logcosh") return "log_cosh";
  if (n == "binary_crossentropy" || n == "binarycrossentropy") return "binary_crossentropy";
  if (n == "categorical_crossentropy" || n == "categoricalcrossentropy") {
    return "categorical_crossentropy";
  }
  if (n == "sparse_categorical_crossentropy" || n == "sparsecategoricalcrossentropy") {
    return "sparse_categorical_crossentropy";
  }
  return name;
}

namespace {

// training_config (Keras 2 .h5) and compile_config (Keras 3 .keras) share these keys: loss,
// metrics, weighted_metrics; Keras 3 writes losses and metrics as strings or serialized objects.
absl::StatusOr<TrainingConfig> ParseCompileJson(const Json& tc, const std::string& what) {
  TrainingConfig out;
  try {
    const Json& loss = tc.contains("loss") ? tc["loss"] : Json();
    if (loss.is_string()) {
      out.loss = CanonicalLossName(loss.get<std::string>());
    } else if (IsSerializedFunction(loss)) {
      out.loss = CanonicalLossName(loss["config"].get<std::string>());
    } else if (loss.is_object() && loss.contains("class_name")) {
      const Json& cfg = ObjectConfig(loss);
      const std::string fn = cfg.contains("fn") && cfg["fn"].is_string()
                                 ? cfg["fn"].get<std::string>()
                                 : loss["class_name"].get<std::string>();
      out.loss = CanonicalLossName(fn);
      out.from_logits = cfg.value("from_logits", false);
      out.huber_delta = cfg.value("delta", 1.0f);
    } else if (loss.is_object() || loss.is_array()) {
      return absl::UnimplementedError(
          absl::StrCat(what, ": per-output losses are not supported by Evaluate"));
    }
    AddMetrics(tc.contains("metrics") ? tc["metrics"] : Json(), false, &out.metrics);
    AddMetrics(tc.contains("weighted_metrics") ? tc["weighted_metrics"] : Json(), true,
               &out.metrics);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad training config: ", e.what()));
  }
  return out;
}

// A Keras 3 .keras file: config.json's compile_config (absent, null or {}: not compiled).
absl::StatusOr<std::optional<TrainingConfig>> ReadCompileConfig(const std::string& path) {
  auto config = keras::ReadKerasZipConfig(path);
  if (!config.ok()) return config.status();
  auto it = config->find("compile_config");
  if (it == config->end() || !it->is_object() || it->empty()) {
    return std::optional<TrainingConfig>();
  }
  auto parsed = ParseCompileJson(*it, absl::StrCat(path, ": compile_config"));
  if (!parsed.ok()) return parsed.status();
  return std::optional<TrainingConfig>(std::move(*parsed));
}

}  // namespace

absl::StatusOr<TrainingConfig> ParseTrainingConfig(const std::string& json_text,
                                                   const std::string& what) {
  Json tc;
  try {
    tc = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad training_config: ", e.what()));
  }
  return ParseCompileJson(tc, what);
}

absl::StatusOr<std::optional<TrainingConfig>> ReadTrainingConfig(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".keras") return ReadCompileConfig(path);
  if (savedmodel::IsSavedModelPath(path)) {
    auto text = savedmodel::ReadKerasTrainingConfig(path);
    if (!text.ok()) return text.status();
    if (!text->has_value()) return std::optional<TrainingConfig>();
    auto config = ParseTrainingConfig(**text, path);
    if (!config.ok()) return config.status();
    return std::optional<TrainingConfig>(std::move(*config));
  }
  if (ext != ".h5" && ext != ".hdf5") return std::optional<TrainingConfig>();
  auto file = keras::Hdf5File::Open(path);
  if (!file.ok()) return file.status();
  if (!file->HasAttribute("/", "training_config")) return std::optional<TrainingConfig>();
  auto text = file->ReadString("/", "training_config");
  if (!text.ok()) return text.status();
  auto config = ParseTrainingConfig(*text, path);
  if (!config.ok()) return config.status();
  return std::optional<TrainingConfig>(std::move(*config));
}

}  // namespace rnnserve::models
