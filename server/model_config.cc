#include "server/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/model_config_triton.h"

namespace rnnserve::server {
namespace {

// Collects the parser's errors into one message.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    absl::StrAppend(&errors_, errors_.empty() ? "" : "; ", "line ", line + 1, ":", column + 1, ": ",
                    message);
  }
  // With AllowUnknownField, an unknown field comes here as
  // `Message type "T" has no field named "F".`; other warnings are ignored.
  void AddWarning(int line, int column, const std::string& message) override {
    static constexpr char kType[] = "Message type \"";
    static constexpr char kField[] = "\" has no field named \"";
    const size_t type_at = message.find(kType);
    const size_t field_at = message.find(kField);
    if (type_at != 0 || field_at == std::string::npos) return;
    const size_t type_begin = sizeof(kType) - 1;
    const size_t name_begin = field_at + sizeof(kField) - 1;
    const size_t name_end = message.find('"', name_begin);
    if (name_end == std::string::npos) return;
    unknown_.push_back({.message_type = message.substr(type_begin, field_at - type_begin),
                        .field = message.substr(name_begin, name_end - name_begin),
                        .line = line + 1,
                        .column = column + 1});
  }
  const std::string& errors() const { return errors_; }
  const std::vector<UnknownConfigField>& unknown() const { return unknown_; }

 private:
  std::string errors_;
  std::vector<UnknownConfigField> unknown_;
};

}  // namespace

namespace {

absl::StatusOr<v1::ModelConfig> ParseText(const std::string& text, const std::string& where) {
  v1::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  // Unknown fields are parsed past, then refused unless Triton defines them
  // (model_config_triton.h).
  parser.AllowUnknownField(true);
  if (!parser.ParseFromString(ColonBeforeTritonLists(text), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", errors.errors()));
  }
  if (auto s = AcceptTritonFields(errors.unknown(), where); !s.ok()) return s;
  return config;
}

}  // namespace

absl::StatusOr<v1::ModelConfig> ParseModelConfig(const std::string& text,
                                                 const std::string& where) {
  auto config = ParseText(text, where);
  if (!config.ok()) return config;
  if (auto s = ValidateModelConfig(*config, where); !s.ok()) return s;
  return config;
}

absl::StatusOr<v1::ModelConfig> ReadModelConfig(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::filesystem::path path = dir / "config.pbtxt";
  absl::StatusOr<v1::ModelConfig> config = v1::ModelConfig();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    config = ParseText(text.str(), path.string());
    if (!config.ok()) return config;
  }
  WarnNameDiffers(config->name(), dir.filename().string(), path.string());
  if (config->name().empty()) config->set_name(dir.filename().string());
  if (auto s = ValidateModelConfig(*config, path.string()); !s.ok()) return s;
  return config;
}

absl::Status ValidateModelConfig(const v1::ModelConfig& config, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  if (config.max_batch_size() < 0) {
    return bad(absl::StrCat("max_batch_size must be >= 0; was ", config.max_batch_size()));
  }
  for (const auto& [label, version] : config.version_labels()) {
    if (label.empty() || version < 1) {
      return bad(absl::StrCat("version_labels: a label needs a name and a version >= 1; was '",
                              label, "' -> ", version));
    }
  }
  const std::string& p = config.platform();
  if (!p.empty() && p != "keras_h5" && p != "keras" && p != "onnx" && p != "tf_savedmodel" &&
      p != "tensorflow_savedmodel") {
    return bad(
        absl::StrCat("platform must be keras_h5, keras, onnx or tf_savedmodel (or Triton's "
                     "tensorflow_savedmodel); was '",
                     p, "'"));
  }
  for (const auto& g : config.instance_group()) {
    if (g.count() < 0)
      return bad(absl::StrCat("instance_group count must be >= 0; was ", g.count()));
    for (int gpu : g.gpus()) {
      if (gpu < 0) return bad(absl::StrCat("instance_group gpus must be >= 0; was ", gpu));
    }
    if (g.kind() == v1::ModelInstanceGroup::KIND_CPU && g.gpus_size() > 0) {
      return bad("instance_group names gpus for KIND_CPU; use KIND_GPU or KIND_AUTO");
    }
  }
  for (const auto& t : config.input()) {
    if (t.name().empty()) return bad("an input has no name");
  }
  for (const auto& t : config.output()) {
    if (t.name().empty()) return bad("an output has no name");
  }
  if (!v1::ModelOptimization::GpuGraphs_IsValid(config.optimization().gpu_graphs())) {
    return bad(absl::StrCat("optimization.gpu_graphs must be GPU_GRAPHS_ON or GPU_GRAPHS_OFF; was ",
                            config.optimization().gpu_graphs()));
  }
  if (!v1::ModelOptimization::CpuWeights_IsValid(config.optimization().cpu_weights())) {
    return bad(absl::StrCat("optimization.cpu_weights must be FP32, BF16 or INT8; was ",
                            config.optimization().cpu_weights()));
  }
  if (config.optimization().cpu_threads() < 0) {
    return bad(absl::StrCat("optimization.cpu_threads must be >= 0; was ",
                            config.optimization().cpu_threads()));
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::server
