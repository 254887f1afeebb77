#include "models/savedmodel/savedmodel.h"

#include <deque>
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

// Ops that only move values between functions and variables: no computation of their own.
const std::set<std::string>& PlumbingOps() {
  static const auto* ops = new std::set<std::string>{"Placeholder",
                                                     "Identity",
                                                     "IdentityN",
                                                     "NoOp",
                                                     "Const",
                                                     "ReadVariableOp",
                                                     "VarHandleOp",
                                                     "PartitionedCall",
                                                     "StatefulPartitionedCall",
                                                     "_Arg",
                                                     "_Retval",
                                                     "RestoreV2",
                                                     "SaveV2",
                                                     "StaticRegexFullMatch",
                                                     "Select",
                                                     "StringJoin",
                                                     "ShardedFilename",
                                                     "MergeV2Checkpoints",
                                                     "Pack",
                                                     "AssignVariableOp",
                                                     "VarIsInitializedOp",
                                                     "DisableCopyOnRead"};
  return *ops;
}

const MetaGraphDef* ServeGraph(const SavedModel& sm) {
  for (const MetaGraphDef& mg : sm.meta_graphs()) {
    for (const std::string& tag : mg.meta_info_def().tags()) {
      if (tag == "serve") return &mg;
    }
  }
  return sm.meta_graphs_size() == 1 ? &sm.meta_graphs(0) : nullptr;
}

// The op types the serving signature computes with (beyond plumbing), in the order first met:
// from the graph nodes that produce the signature's outputs, breadth first through the
// functions they call.
std::vector<std::string> ComputeOps(const MetaGraphDef& mg, const SignatureDef& sig) {
  std::map<std::string, const FunctionDef*> functions;
  for (const FunctionDef& f : mg.graph_def().library().function()) {
    functions[f.signature().name()] = &f;
  }
  std::set<std::string> roots;
  for (const auto& [key, info] : sig.outputs()) {
    roots.insert(info.name().substr(0, info.name().find(':')));
  }
  std::vector<std::string> ops;
  std::set<std::string> seen_ops;
  std::deque<std::string> queue;
  std::set<std::string> seen_functions;
  auto visit = [&](const NodeDef& node) {
    if (!PlumbingOps().count(node.op()) && seen_ops.insert(node.op()).second) {
      ops.push_back(node.op());
    }
    for (const auto& [key, attr] : node.attr()) {
      if (attr.has_func() && seen_functions.insert(attr.func().name()).second) {
        queue.push_back(attr.func().name());
      }
    }
  };
  for (const NodeDef& node : mg.graph_def().node()) {
    if (roots.count(node.name())) visit(node);
  }
  while (!queue.empty()) {
    auto it = functions.find(queue.front());
    queue.pop_front();
    if (it == functions.end()) continue;
    for (const NodeDef& node : it->second->node_def()) visit(node);
  }
  return ops;
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
  SavedModel sm;
  if (!sm.ParseFromString(*bytes)) {
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
    std::vector<std::string> ops = ComputeOps(*mg, *signature);
    constexpr size_t kShown = 12;
    const size_t total = ops.size();
    if (ops.size() > kShown) ops.resize(kShown);
    bool keras_objects = false;
    for (const SavedObject& node : mg->object_graph_def().nodes()) {
      keras_objects |= absl::StartsWith(node.user_object().identifier(), "_tf_keras_");
    }
    const std::string what =
        keras_objects ? "a tf_keras model's SavedModel without its Keras metadata (no "
                        "keras_metadata.pb: tf.saved_model.save writes none; tf_keras "
                        "model.save(dir) does)"
                      : "a SavedModel without Keras metadata (no keras_metadata.pb, as Keras 3's "
                        "model.export and tf.saved_model.save write)";
    return absl::UnimplementedError(absl::StrCat(
        dir, ": ", what, ": rnnserve does not run TensorFlow graphs",
        ops.empty() ? ""
                    : absl::StrCat("; its serving function computes with op '", ops[0], "' (ops: ",
                                   absl::StrJoin(ops, ", "), total > kShown ? ", ..." : "", ")"),
        ". Bring the model's .keras or .h5 file (model.save('model.keras')) or a SavedModel "
        "written by tf_keras model.save(dir)"));
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
