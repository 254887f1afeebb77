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

  // The layers from the model's input to `out`, in that order.
  absl::StatusOr<std::vector<Layer>> Layers(const std::string& top_ret);
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
  // Bidirectional(merge_mode="concat"): ConcatV2(forward, backward), the backward half's
  // sequence reversed back (ReverseV2) when it returns sequences; both over the same input.
  absl::StatusOr<Value> Bidirectional(const Frame& frame, const NodeDef& node,
                                      std::vector<Layer>* layers);
  absl::StatusOr<RnnFound> Rnn(const Frame& frame, const NodeDef& loop, bool return_sequences);

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
