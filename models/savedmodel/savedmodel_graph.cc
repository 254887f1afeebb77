// The graph path of savedmodel.h: SavedModels without Keras metadata (Keras 3 `model.export`,
// `tf.saved_model.save` of a tf_keras model). The serving signature's function is walked back
// from each of its outputs (function_graph.h, graph_walk.cc), recognising one Keras layer at a
// time until the model's inputs are reached:
//   Dense               BiasAdd(MatMul(x, kernel), bias), or on [B, T, F] Keras's Tensordot
//                       (Reshape(MatMul(Reshape(Transpose(x)), kernel))), then an activation op
//   LSTM / GRU /        a While loop over TensorListFromTensor(Transpose(x)) (ReverseV2 for
//   SimpleRNN           go_backwards); Transpose(TensorListStack(while)) is return_sequences,
//                       StridedSlice(...)[-1] the last output. The cell is told by its weights:
//                       kernel [I, G*H], recurrent_kernel [H, G*H] with G = 4 (LSTM), 3 (GRU),
//                       1 (SimpleRNN); a GRU's bias [2, 3H] is reset_after=True, [3H] False.
//                       The activations are the body's activation ops (an LSTM's two `activation`
//                       and three `recurrent_activation` ops, a GRU's one and two).
//   Masking             SelectV2(Any(NotEqual(x, mask_value)), x, 0); the masked loops below it
//                       carry a second TensorList, the mask, made of the same x
//   Bidirectional       forward loop and ReverseV2(go_backwards loop) over the same x, merged
//                       by ConcatV2, AddV2, Mul or RealDiv(AddV2, 2); None: two model outputs
//   LSTM / GRU on cuDNN CudnnRNNV3 (graph_cudnn.cc): its params evaluated from the variables
//   Concatenate / Add / ConcatV2, AddV2, Mul, RealDiv(AddV2, 2) of other values
//   Multiply / Average
//   BatchNormalization  tf.nn.batch_normalization's AddV2(Mul(x, m), Sub(beta, Mul(mean, m)))
//   Embedding           GatherV2 / ResourceGather of the table; mask_zero when a loop's mask is
//                       NotEqual(ids, 0)
//   Dropout             absent from a serving graph: nothing to recognise.
// Weights are the captured variables (the function's bound_inputs in the SavedObjectGraph),
// read from the checkpoint by object id; their role (kernel, recurrent_kernel, bias) is the
// last part of the variable's name, as Keras names them. The layers become a Keras functional
// config with the same weights (inputs in the serving function's argument order, outputs in
// its output order, both named by the signature's keys), built by keras_config.h as the .h5 and
// .keras files are, so the gate order conversion is the one the Keras loaders use (Keras: LSTM
// i,f,c,o; GRU z,r,h). Anything else on the way (masking's Select in a loop body, an op we do not
// run) is refused, naming the op, with a request for the .keras or .h5 file.

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_config.h"
#include "models/savedmodel/function_graph.h"
#include "models/savedmodel/graph_layers.h"
#include "models/savedmodel/savedmodel_internal.h"
#include "models/savedmodel/tensor_bundle.h"

namespace rnnserve::models::savedmodel {
namespace {

namespace fs = std::filesystem;
using graph::Json;
using graph::kBringKeras;
using graph::Layer;
using graph::Recogniser;

constexpr char kObjectGraphKey[] = "_CHECKPOINTABLE_OBJECT_GRAPH";

}  // namespace

namespace {

// The Keras dtype name of a signature input.
std::string KerasDtype(DataType dtype) {
  return dtype == DT_FLOAT   ? "float32"
         : dtype == DT_INT32 ? "int32"
         : dtype == DT_INT64 ? "int64"
                             : "";
}

// The signature's inputs in the order of the serving function's args: input p is the
// placeholder the call node passes as its data input p.
absl::StatusOr<std::vector<std::pair<std::string, const TensorInfo*>>> SignatureInputs(
    const std::string& dir, const NodeDef& call, const SignatureDef& sig, int num_inputs) {
  std::vector<std::pair<std::string, const TensorInfo*>> inputs(num_inputs);
  for (const auto& [key, info] : sig.inputs()) {
    const std::string placeholder = ParseValue(info.name()).node;
    int p = -1;
    int data = 0;
    for (const std::string& in : call.input()) {
      if (in.empty() || in[0] == '^') continue;
      if (ParseValue(in).node == placeholder && p < 0) p = data;
      ++data;
    }
    if (p < 0 || p >= num_inputs || inputs[p].second) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving signature's input '", key,
                                                     "' is not an input of its function"));
    }
    inputs[p] = {key, &info};
  }
  for (const auto& [key, info] : inputs) {
    if (!info) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": the serving function takes an input the serving signature does not name"));
    }
  }
  return inputs;
}

}  // namespace

absl::StatusOr<engine::Model> LoadGraphSavedModel(const std::string& dir, const MetaGraphDef& mg,
                                                  const SignatureDef& sig) {
  if (sig.inputs_size() < 1 || sig.outputs_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the serving signature has no inputs or no outputs"));
  }
  // Every output is an output of one call of the serving function: (its index, the key).
  std::vector<std::pair<int, std::string>> outputs;
  std::string call_name;
  for (const auto& [key, info] : sig.outputs()) {
    const ValueName v = ParseValue(info.name());
    if (v.index < 0 || (!call_name.empty() && v.node != call_name)) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving signature's output '", key,
                                                     "' (", info.name(),
                                                     ") is not an output of its function call"));
    }
    call_name = v.node;
    outputs.emplace_back(v.index, key);
  }
  std::sort(outputs.begin(), outputs.end());
  const NodeDef* call = nullptr;
  for (const NodeDef& n : mg.graph_def().node()) {
    if (n.name() == call_name) call = &n;
  }
  auto f = call ? call->attr().find("f")
                : google::protobuf::Map<std::string, AttrValue>::const_iterator();
  if (!call || f == call->attr().end() || !f->second.has_func()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving signature's output '",
                                                   outputs[0].second, "' is not a function call"));
  }
  auto graph = FunctionGraph::Create(mg, f->second.func().name());
  if (!graph.ok())
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", graph.status().message()));
  auto inputs = SignatureInputs(dir, *call, sig, graph->num_model_inputs());
  if (!inputs.ok()) return inputs.status();
  const FunctionDef& top = *graph->top().fn;
  std::vector<std::string> top_rets;
  for (const auto& [index, key] : outputs) {
    if (index >= top.signature().output_arg_size()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": no output ", index));
    }
    auto ret = top.ret().find(top.signature().output_arg(index).name());
    if (ret == top.ret().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": the serving function does not return its output ", index));
    }
    top_rets.push_back(ret->second);
  }

  auto bundle = TensorBundle::Open((fs::path(dir) / "variables" / "variables").string());
  if (!bundle.ok()) return bundle.status();
  auto graph_bytes = bundle->ReadScalarString(kObjectGraphKey);
  if (!graph_bytes.ok()) return graph_bytes.status();
  TrackableObjectGraph checkpoint_graph;
  if (!checkpoint_graph.ParseFromString(*graph_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the checkpoint's object graph does not parse"));
  }
  Recogniser recogniser(dir, mg, std::move(*graph), std::move(*bundle),
                        std::move(checkpoint_graph));
  auto walked = recogniser.Walk(top_rets);
  if (!walked.ok()) return walked.status();
  for (const graph::Ref& r : walked->outputs) {
    if (r.node < 0) {
      return absl::UnimplementedError(
          absl::StrCat(dir, ": the serving function returns its input unchanged", kBringKeras));
    }
  }

  // A Keras functional config of the recognised layers, built as the Keras files are.
  Json keras_layers = Json::array();
  Json input_layers = Json::array();
  std::set<std::string> used;
  for (const auto& [key, info] : *inputs) {
    Json batch_shape = Json::array();
    if (info->tensor_shape().unknown_rank() || info->tensor_shape().dim_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": the serving signature's input '", key, "' has no shape"));
    }
    for (const auto& d : info->tensor_shape().dim()) {
      batch_shape.push_back(d.size() < 0 ? Json() : Json(d.size()));
    }
    const std::string dtype = KerasDtype(info->dtype());
    if (dtype.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving signature's input '", key,
                                                     "' has dtype ", DataType_Name(info->dtype()),
                                                     ", not float32, int32 or int64"));
    }
    keras_layers.push_back(
        {{"class_name", "InputLayer"},
         {"config", {{"name", key}, {"batch_input_shape", batch_shape}, {"dtype", dtype}}}});
    input_layers.push_back(Json::array({key, 0, 0}));
    used.insert(key);
  }
  std::vector<std::string> names;
  std::map<std::string, std::vector<keras::Array>> weights;
  std::map<std::string, int> counts;
  auto ref_json = [&](const graph::Ref& r) {
    return Json::array({r.node < 0 ? (*inputs)[-1 - r.node].first : names[r.node], 0, r.tensor});
  };
  for (graph::GraphNode& node : walked->nodes) {
    const std::string base =
        absl::AsciiStrToLower(node.layer.config["class_name"].get<std::string>());
    std::string name = base;
    while (used.count(name)) name = absl::StrCat(base, "_", ++counts[base]);
    used.insert(name);
    names.push_back(name);
    Json inbound = Json::array();
    for (const graph::Ref& r : node.inputs) {
      Json ref = ref_json(r);
      ref.push_back(Json::object());
      inbound.push_back(ref);
    }
    node.layer.config["config"]["name"] = name;
    // A layer, never one of Keras 3's op layers (which the reader tells by a config without it).
    node.layer.config["config"]["trainable"] = true;
    node.layer.config["name"] = name;
    node.layer.config["inbound_nodes"] = Json::array({inbound});
    keras_layers.push_back(node.layer.config);
    weights[name] = std::move(node.layer.weights);
  }
  Json output_layers = Json::array();
  for (const graph::Ref& r : walked->outputs) output_layers.push_back(ref_json(r));
  Json model_config = {{"class_name", "Functional"},
                       {"config",
                        {{"name", "model"},
                         {"layers", keras_layers},
                         {"input_layers", input_layers},
                         {"output_layers", output_layers}}}};
  keras::KerasSource source{.file = dir, .format = "tf_savedmodel", .keras_version = "3.0.0"};
  auto model =
      keras::BuildModel(model_config, source,
                        [&](const std::string& layer) -> absl::StatusOr<std::vector<keras::Array>> {
                          auto it = weights.find(layer);
                          if (it == weights.end()) return std::vector<keras::Array>();
                          return it->second;
                        });
  if (!model.ok()) return model.status();
  // Named as the signature names them (the keys of TF Serving's requests and responses).
  if (model->outputs.size() != outputs.size()) {
    return absl::InternalError(
        absl::StrCat(dir, ": ", model->outputs.size(), " outputs built for ", outputs.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) model->outputs[i].name = outputs[i].second;
  return model;
}

}  // namespace rnnserve::models::savedmodel
