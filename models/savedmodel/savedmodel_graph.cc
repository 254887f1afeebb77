// The graph path of savedmodel.h: SavedModels without Keras metadata (Keras 3 `model.export`,
// `tf.saved_model.save` of a tf_keras model). The serving signature's function is walked back
// from its output (function_graph.h), recognising one Keras layer at a time until the model's
// input is reached:
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
//   Bidirectional       ConcatV2(forward loop, ReverseV2(go_backwards loop)) over the same x
//   BatchNormalization  tf.nn.batch_normalization's AddV2(Mul(x, m), Sub(beta, Mul(mean, m)))
//   Embedding           GatherV2 / ResourceGather of the table; mask_zero when a loop's mask is
//                       NotEqual(ids, 0)
//   Dropout             absent from a serving graph: nothing to recognise.
// Weights are the captured variables (the function's bound_inputs in the SavedObjectGraph),
// read from the checkpoint by object id; their role (kernel, recurrent_kernel, bias) is the
// last part of the variable's name, as Keras names them. The layers become a Keras Sequential
// config with the same weights, built by keras_config.h as the .h5 and .keras files are, so the
// gate order conversion is the one the Keras loaders use (Keras: LSTM i,f,c,o; GRU z,r,h).
// Anything else on the way (masking's Select in a loop body, an op we do not run) is refused,
// naming the op, with a request for the .keras or .h5 file.

#include <filesystem>
#include <map>

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

absl::StatusOr<engine::Model> LoadGraphSavedModel(const std::string& dir, const MetaGraphDef& mg,
                                                  const SignatureDef& sig) {
  if (sig.inputs_size() != 1 || sig.outputs_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        dir, ": a SavedModel without Keras metadata whose serving signature has ",
        sig.inputs_size(), " inputs and ", sig.outputs_size(),
        " outputs; rnnserve recognises graph-only SavedModels of one input and one output",
        kBringKeras));
  }
  const TensorInfo& in_info = sig.inputs().begin()->second;
  const TensorInfo& out_info = sig.outputs().begin()->second;
  const ValueName out = ParseValue(out_info.name());
  const NodeDef* call = nullptr;
  for (const NodeDef& n : mg.graph_def().node()) {
    if (n.name() == out.node) call = &n;
  }
  auto f = call ? call->attr().find("f")
                : google::protobuf::Map<std::string, AttrValue>::const_iterator();
  if (!call || f == call->attr().end() || !f->second.has_func() || out.index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving signature's output '",
                                                   out_info.name(), "' is not a function call"));
  }
  auto graph = FunctionGraph::Create(mg, f->second.func().name());
  if (!graph.ok())
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", graph.status().message()));
  if (graph->num_model_inputs() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving function takes ",
                                                   graph->num_model_inputs(), " inputs, not 1"));
  }
  const FunctionDef& top = *graph->top().fn;
  if (out.index >= top.signature().output_arg_size()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": no output ", out.index));
  }
  auto ret = top.ret().find(top.signature().output_arg(out.index).name());
  if (ret == top.ret().end()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": the serving function returns nothing"));
  }
  const std::string top_ret = ret->second;

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
  auto layers = recogniser.Layers(top_ret);
  if (!layers.ok()) return layers.status();
  if (layers->empty()) {
    return absl::UnimplementedError(
        absl::StrCat(dir, ": the serving function returns its input unchanged", kBringKeras));
  }

  // A Keras Sequential config of the recognised layers, built as the Keras files are.
  Json batch_shape = Json::array();
  if (in_info.tensor_shape().unknown_rank() || in_info.tensor_shape().dim_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the serving signature's input has no shape"));
  }
  for (const auto& d : in_info.tensor_shape().dim()) {
    batch_shape.push_back(d.size() < 0 ? Json() : Json(d.size()));
  }
  const std::string dtype = in_info.dtype() == DT_FLOAT   ? "float32"
                            : in_info.dtype() == DT_INT32 ? "int32"
                            : in_info.dtype() == DT_INT64 ? "int64"
                                                          : "";
  if (dtype.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the serving signature's input has dtype ",
                     DataType_Name(in_info.dtype()), ", not float32, int32 or int64"));
  }
  const std::string input_name = sig.inputs().begin()->first;
  Json keras_layers = Json::array();
  keras_layers.push_back(
      {{"class_name", "InputLayer"},
       {"config", {{"name", input_name}, {"batch_input_shape", batch_shape}, {"dtype", dtype}}}});
  std::map<std::string, std::vector<keras::Array>> weights;
  std::map<std::string, int> counts;
  for (Layer& layer : *layers) {
    std::string cls = layer.config["class_name"].get<std::string>();
    std::string name = absl::AsciiStrToLower(cls);
    if (int n = counts[name]++; n > 0) absl::StrAppend(&name, "_", n);
    layer.config["config"]["name"] = name;
    keras_layers.push_back(layer.config);
    weights[name] = std::move(layer.weights);
  }
  Json model_config = {{"class_name", "Sequential"},
                       {"config", {{"name", "sequential"}, {"layers", keras_layers}}}};
  keras::KerasSource source{.file = dir, .format = "tf_savedmodel", .keras_version = "3.0.0"};
  return keras::BuildModel(
      model_config, source,
      [&](const std::string& layer) -> absl::StatusOr<std::vector<keras::Array>> {
        auto it = weights.find(layer);
        if (it == weights.end()) return std::vector<keras::Array>();
        return it->second;
      });
}

}  // namespace rnnserve::models::savedmodel
