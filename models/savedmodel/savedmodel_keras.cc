// The Keras metadata path of savedmodel.h: architecture from keras_metadata.pb, weights from
// the variables checkpoint through its object graph.

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/keras/keras_config.h"
#include "models/savedmodel/savedmodel_internal.h"
#include "models/savedmodel/tensor_bundle.h"

namespace rnnserve::models::savedmodel {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Graph = TrackableObjectGraph;

constexpr char kObjectGraphKey[] = "_CHECKPOINTABLE_OBJECT_GRAPH";
constexpr int kMaxDepth = 16;

// tf_keras's SavedModel JSON encodes tuples and TensorShapes as
// {"class_name": "__tuple__" | "TensorShape", "items": [...]}; the .h5 JSON has plain lists.
Json Untuple(const Json& j) {
  if (j.is_object()) {
    auto cls = j.find("class_name");
    auto items = j.find("items");
    if (cls != j.end() && items != j.end() && cls->is_string() && items->is_array() &&
        (*cls == "__tuple__" || *cls == "TensorShape")) {
      return Untuple(*items);
    }
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = Untuple(it.value());
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& v : j) out.push_back(Untuple(v));
    return out;
  }
  return j;
}

// Lists under a layer that hold other objects' variables, or nothing the weights need.
bool SkippedChild(const std::string& name) {
  static const std::set<std::string> kSkipped = {"keras_api",
                                                 "signatures",
                                                 "trainable_variables",
                                                 "non_trainable_variables",
                                                 "regularization_losses",
                                                 "state_spec",
                                                 "states",
                                                 "layers",
                                                 "metrics",
                                                 "optimizer",
                                                 "layer_regularization_losses",
                                                 "layer_metrics"};
  return absl::StartsWith(name, "_") || kSkipped.count(name) != 0;
}

class KerasCheckpoint {
 public:
  KerasCheckpoint(std::string dir, TensorBundle bundle, Graph graph)
      : dir_(std::move(dir)), bundle_(std::move(bundle)), graph_(std::move(graph)) {}

  // The node at a keras_metadata node path ("root.layer_with_weights-0.cell").
  absl::StatusOr<int> Resolve(const std::string& path) const {
    std::vector<std::string> parts = absl::StrSplit(path, '.');
    if (parts.empty() || parts[0] != "root" || graph_.nodes_size() == 0) {
      return Error(absl::StrCat("bad node path '", path, "'"));
    }
    int node = 0;
    for (size_t i = 1; i < parts.size(); ++i) {
      int next = -1;
      for (const auto& child : graph_.nodes(node).children()) {
        if (child.local_name() == parts[i]) next = child.node_id();
      }
      if (next < 0 || next >= graph_.nodes_size()) {
        return Error(absl::StrCat("the checkpoint's object graph has no object at '", path, "'"));
      }
      node = next;
    }
    return node;
  }

  // The layer's weight arrays in its weight order.
  absl::StatusOr<std::vector<keras::Array>> Weights(int node) const {
    std::vector<std::string> keys;
    std::set<int> seen;
    const std::optional<int> list = Child(node, "variables");
    if (list) {
      std::vector<std::pair<int, int>> indexed;  // (index in the list, node)
      for (const auto& child : graph_.nodes(*list).children()) {
        int index = 0;
        if (!absl::SimpleAtoi(child.local_name(), &index)) continue;
        indexed.emplace_back(index, child.node_id());
      }
      std::sort(indexed.begin(), indexed.end());
      for (const auto& [index, id] : indexed) {
        if (auto key = VariableKey(id); !key.empty()) keys.push_back(key);
      }
    } else {
      Collect(node, 0, &seen, &keys);
    }
    std::vector<keras::Array> arrays;
    for (const std::string& key : keys) {
      auto array = bundle_.ReadFloat(key);
      if (!array.ok()) return array.status();
      arrays.push_back(std::move(*array));
    }
    return arrays;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": ", what));
  }
  std::optional<int> Child(int node, const std::string& name) const {
    for (const auto& child : graph_.nodes(node).children()) {
      if (child.local_name() == name && child.node_id() >= 0 &&
          child.node_id() < graph_.nodes_size()) {
        return child.node_id();
      }
    }
    return std::nullopt;
  }
  std::string VariableKey(int node) const {
    if (node < 0 || node >= graph_.nodes_size()) return "";
    for (const auto& attr : graph_.nodes(node).attributes()) {
      if (attr.name() == "VARIABLE_VALUE") return attr.checkpoint_key();
    }
    return "";
  }
  // Variables below `node`, depth first in child order (models saved without traces).
  void Collect(int node, int depth, std::set<int>* seen, std::vector<std::string>* keys) const {
    if (depth > kMaxDepth || node < 0 || node >= graph_.nodes_size() ||
        !seen->insert(node).second) {
      return;
    }
    if (auto key = VariableKey(node); !key.empty()) {
      keys->push_back(key);
      return;
    }
    for (const auto& child : graph_.nodes(node).children()) {
      if (!SkippedChild(child.local_name())) Collect(child.node_id(), depth + 1, seen, keys);
    }
  }

  const std::string dir_;
  const TensorBundle bundle_;
  const Graph graph_;
};

}  // namespace

absl::StatusOr<std::string> KerasRootMetadata(const std::string& metadata_bytes,
                                              const std::string& what) {
  KerasSavedMetadata metadata;
  if (!metadata.ParseFromString(metadata_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": does not parse (truncated or not Keras metadata)"));
  }
  for (const KerasSavedObject& node : metadata.nodes()) {
    if (node.node_path() == "root") return node.metadata();
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": no root node"));
}

absl::StatusOr<engine::Model> LoadKerasSavedModel(const std::string& dir,
                                                  const std::string& metadata_bytes) {
  const std::string metadata_path = (fs::path(dir) / "keras_metadata.pb").string();
  KerasSavedMetadata metadata;
  if (!metadata.ParseFromString(metadata_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(metadata_path, ": does not parse (truncated or not Keras metadata)"));
  }
  Json root;
  std::map<std::string, std::string> layer_paths;  // layer name -> node path, shortest
  for (const KerasSavedObject& node : metadata.nodes()) {
    Json j = Json::parse(node.metadata(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(metadata_path, ": the metadata of '",
                                                     node.node_path(), "' is not a JSON object"));
    }
    if (node.node_path() == "root") {
      root = std::move(j);
      continue;
    }
    auto name = j.find("name");
    if (name == j.end() || !name->is_string()) continue;
    auto [it, added] = layer_paths.emplace(name->get<std::string>(), node.node_path());
    if (!added && node.node_path().size() < it->second.size()) it->second = node.node_path();
  }
  if (!root.is_object() || !root.contains("class_name") || !root.contains("config")) {
    return absl::InvalidArgumentError(
        absl::StrCat(metadata_path, ": no root node with the model's class_name and config"));
  }
  Json model_config = {{"class_name", root["class_name"]}, {"config", Untuple(root["config"])}};
  keras::KerasSource source{.file = dir, .format = "tf_savedmodel", .keras_version = "2"};
  if (auto v = root.find("keras_version"); v != root.end() && v->is_string()) {
    source.keras_version = v->get<std::string>();
  }

  auto bundle = TensorBundle::Open((fs::path(dir) / "variables" / "variables").string());
  if (!bundle.ok()) return bundle.status();
  auto graph_bytes = bundle->ReadScalarString(kObjectGraphKey);
  if (!graph_bytes.ok()) return graph_bytes.status();
  Graph graph;
  if (!graph.ParseFromString(*graph_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the checkpoint's object graph does not parse"));
  }
  const KerasCheckpoint checkpoint(dir, std::move(*bundle), std::move(graph));
  keras::WeightSource weights =
      [&](const std::string& layer) -> absl::StatusOr<std::vector<keras::Array>> {
    auto it = layer_paths.find(layer);
    if (it == layer_paths.end()) return std::vector<keras::Array>();  // a layer without weights
    auto node = checkpoint.Resolve(it->second);
    if (!node.ok()) return node.status();
    return checkpoint.Weights(*node);
  };
  return keras::BuildModel(model_config, source, weights);
}

}  // namespace rnnserve::models::savedmodel
