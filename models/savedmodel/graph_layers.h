#pragma once

// The layer recogniser of savedmodel_graph.cc, shared by graph_layers.cc (the walk, Dense,
// Masking, BatchNormalization, Embedding) and graph_recurrent.cc (the While loops and
// Bidirectional). Internal to models/savedmodel/.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/keras/hdf5_file.h"
#include "models/savedmodel/function_graph.h"
#include "models/savedmodel/savedmodel.pb.h"
#include "models/savedmodel/tensor_bundle.h"

namespace rnnserve::models::savedmodel::graph {

using Json = nlohmann::json;

inline constexpr char kBringKeras[] =
    "; bring the model's .keras or .h5 file (model.save('model.keras')) or a SavedModel written "
    "by tf_keras model.save(dir)";

// Keras activation name of an activation op (Tanh -> "tanh"); nullptr for other ops.
const char* ActivationOf(const std::string& op);

struct Value {
  const Frame* frame;
  std::string name;
};

struct Layer {
  Json config;  // {"class_name", "config"}
  std::vector<keras::Array> weights;
};

// Where a layer reads a value: a recognised layer's output `tensor`, or (node < 0) the
// model's input -1 - node.
struct Ref {
  int node = 0;
  int tensor = 0;
};

// One recognised Keras layer call, in the walk's graph.
struct GraphNode {
  Layer layer;
  std::vector<Ref> inputs;
  int num_outputs = 1;
};

// The recognised layers in topological order and the model's outputs, in the serving
// function's output order.
struct LayerGraph {
  std::vector<GraphNode> nodes;
  std::vector<Ref> outputs;
};

// A layer recognised at one of its outputs: the layer, the values it reads and, for a layer of
// several outputs, the values of its other outputs (tensor 1, 2, ...).
struct Recognised {
  Layer layer;
  std::vector<Value> inputs;
  std::vector<Value> more_outputs;
};

// A recurrent layer recognised at its output: the layer, its input and, for a masked loop,
// the value its mask is computed from (a Masking layer's input).
struct RnnFound {
  Layer layer;
  Value x;
  std::optional<Value> mask_from;
};

// Walks the serving function back from its output, one Keras layer at a time.
class Recogniser {
 public:
  Recogniser(std::string dir, const MetaGraphDef& mg, FunctionGraph graph, TensorBundle bundle,
             TrackableObjectGraph checkpoint_graph)
      : dir_(std::move(dir)),
        mg_(mg),
        graph_(std::move(graph)),
        bundle_(std::move(bundle)),
        checkpoint_graph_(std::move(checkpoint_graph)) {}

  // The layers from the model's inputs to the serving function's outputs (`top_rets`, values
  // of the top function): each output is walked back, one layer at a time, to the model's
  // inputs or to a value an earlier walk reached (graph_walk.cc).
  absl::StatusOr<LayerGraph> Walk(const std::vector<std::string>& top_rets);
  absl::Status Unsupported(const std::string& op, const std::string& node = "") const;

 private:
  absl::Status Error(absl::string_view what) const;
  // The variable object `id`'s name and value.
  absl::StatusOr<std::pair<std::string, keras::Array>> Variable(int id) const;
  // Whether the SavedObjectGraph holds a variable of this name.
  bool HasVariable(const std::string& name) const;
  // The variable behind a node's input `i`, which must be one.
  absl::StatusOr<std::pair<std::string, keras::Array>> WeightInput(const Frame& frame,
                                                                   const NodeDef& node, int i);
  absl::StatusOr<const NodeDef*> NodeInput(const Frame& frame, const NodeDef& node, int i,
                                           const std::string& op, const Frame** at);
  static bool Attr(const NodeDef& node, const std::string& name) {
    auto it = node.attr().find(name);
    return it != node.attr().end() && it->second.b();
  }
  absl::StatusOr<Value> Dense(const Frame& frame, const NodeDef& node,
                              const std::string& activation, std::vector<Layer>* layers);
  // Transpose(TensorListStack(while:3)) (return_sequences), StridedSlice(...) (its last step) or
  // While:4 (the last h).
  absl::StatusOr<RnnFound> RnnOutput(const Source& out);
  // For a loop's mask list, Transpose(ExpandDims(Any(NotEqual(x, mask_value)))) (ReverseV2 of it
  // going backwards): x, the Masking
  // layer's input; nullopt for a list that is not a mask.
  absl::StatusOr<std::optional<Value>> MaskInput(const Frame& frame, const NodeDef& from_tensor);
  // Whether two values are made by the same node output (or are the same model input).
  bool Same(const Value& a, const Value& b);
  // The float scalar a Const node holds.
  absl::StatusOr<float> ScalarConst(const Frame& frame, const NodeDef& node, int i);
  // Masking: SelectV2(Any(NotEqual(x, mask_value)), x, 0).
  absl::StatusOr<Value> Masking(const Frame& frame, const NodeDef& node,
                                std::vector<Layer>* layers);
  // The node behind input `i` of `node`, which must be a `op`.
  absl::StatusOr<Source> Expect(const Frame& frame, const NodeDef& node, int i,
                                const std::string& op, const NodeDef& layer);
  // BatchNormalization at inference, as tf.nn.batch_normalization writes it:
  //   AddV2(Mul(x, m), Sub(beta, Mul(moving_mean, m))), m = Mul(Rsqrt(AddV2(variance, eps)), gamma)
  absl::StatusOr<Value> BatchNormalization(const Frame& frame, const NodeDef& node,
                                           std::vector<Layer>* layers);
  // Embedding: GatherV2(embeddings, ids) (Keras 3 first maps negative ids: SelectV2(Less(ids,
  // 0), AddV2(ids, input_dim), ids)) or tf_keras's ResourceGather(embeddings, ids).
  absl::StatusOr<Value> Embedding(const Frame& frame, const NodeDef& node,
                                  std::vector<Layer>* layers);
  // Bidirectional: `fw` and `bw` are the forward and backward halves' outputs over the same
  // input, the backward half's sequence reversed back (ReverseV2) when it returns sequences;
  // the merge is the caller's op (ConcatV2 concat, AddV2 sum, Mul mul, RealDiv(AddV2, 2) ave,
  // none: two model outputs). nullopt when they are not the two halves of one layer.
  absl::StatusOr<std::optional<Recognised>> BidirectionalOf(const Value& fw, const Value& bw,
                                                            const Json& merge_mode);
  absl::StatusOr<RnnFound> Rnn(const Frame& frame, const NodeDef& loop, bool return_sequences);
  // graph_cudnn.cc: a CudnnRNNV3 op (`op` is its output or output_h) as a Keras LSTM or GRU.
  absl::StatusOr<RnnFound> CudnnRnn(const Source& op, bool return_sequences);
  // The value of `s`, a few ops (Split, Transpose, Reshape, ConcatV2, ZerosLike, Const) over
  // variables: a cuDNN op's params.
  absl::StatusOr<keras::Array> Evaluate(const Source& s, int depth);

  // graph_walk.cc: the walk.
  struct Memo {
    Source at;
    Ref ref;
    // A Masking layer's input or an Embedding's ids: the loops a second branch finds masked by
    // it (reaching this layer again) are accounted for here.
    std::optional<Value> mask_source;
  };
  // Where the walk reads `v`: a model input, a layer already recognised, or a new layer (and
  // its inputs, walked first).
  absl::StatusOr<Ref> Resolve(const Value& v, int depth);
  // The layer whose output `s` is.
  absl::StatusOr<Recognised> RecogniseAt(const Source& s);
  // A merge of two or more values (Concatenate, Add, Multiply, Average) or a Bidirectional.
  absl::StatusOr<Recognised> Merge(const Source& s);
  const Memo* Find(const Source& s) const;
  static Recognised One(Layer layer, Value in) {
    Recognised r;
    r.layer = std::move(layer);
    r.inputs.push_back(std::move(in));
    return r;
  }
  // A layer recogniser of the chain form (pushes one layer, returns its input) as Recognised.
  template <typename F>
  absl::StatusOr<Recognised> Single(F f) {
    std::vector<Layer> layers;
    absl::StatusOr<Value> in = f(&layers);
    if (!in.ok()) return in.status();
    if (layers.size() != 1) return Error("a layer recogniser made no layer");
    return One(std::move(layers[0]), *in);
  }
  LayerGraph out_;
  std::vector<Memo> memo_;

  const std::string dir_;
  const MetaGraphDef& mg_;
  FunctionGraph graph_;
  const TensorBundle bundle_;
  const TrackableObjectGraph checkpoint_graph_;
  // Masking layer inputs that recognised recurrent layers' masks are made of, until the
  // Masking layer itself is reached (walking back).
  std::vector<Value> open_masks_;
};

}  // namespace rnnserve::models::savedmodel::graph
