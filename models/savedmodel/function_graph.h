#pragma once

// Walks a SavedModel's serving function graph backwards, value by value, across the functions
// it calls (StatefulPartitionedCall / PartitionedCall `f`, While `body`), as
// savedmodel_graph.cc's layer recogniser needs it.
//
// A value is named as TensorFlow names it inside a FunctionDef: "node:output_arg:index" for a
// node's output, or the name of one of the function's input args. Trace() follows a value
// through what only moves it (Identity, IdentityN, ReadVariableOp, calls into the callee's
// `ret`, args out to the caller's inputs, a While's loop-invariant args) to where it is made:
// a computing node, one of the model's inputs (an input arg of the signature's function), or a
// SavedObjectGraph object (a captured variable, through the function's bound_inputs).

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/savedmodel/savedmodel.pb.h"

namespace rnnserve::models::savedmodel {

// A function's nodes and input args by name, built once per function.
struct FunctionIndex {
  std::map<std::string, const NodeDef*> nodes;
  std::map<std::string, int> args;  // input arg name -> index
};

// One call of a function: its index, and where its args come from.
struct Frame {
  const FunctionDef* fn = nullptr;
  const FunctionIndex* index = nullptr;
  const Frame* caller = nullptr;  // nullptr for the signature's function
  const NodeDef* call = nullptr;  // the caller's node that called this frame
};

struct Source {
  enum class Kind { kNode, kModelInput, kObject };
  Kind kind = Kind::kNode;
  const Frame* frame = nullptr;  // kNode: the node's frame
  const NodeDef* node = nullptr;
  int output = 0;          // kNode: the index within its output arg (Split:output:2 -> 2)
  std::string output_arg;  // kNode: the output arg's name ("output", "product", "y")
  int index = 0;      // kModelInput: the signature function's input; kObject: the object node id
  bool read = false;  // went through a ReadVariableOp (a variable's value, not its handle)
};

class FunctionGraph {
 public:
  // `top` is the signature's function (e.g. __inference_signature_wrapper_...), whose trailing
  // `bound_inputs.size()` input args are captured objects.
  static absl::StatusOr<FunctionGraph> Create(const MetaGraphDef& mg, const std::string& top);

  const Frame& top() const { return *frames_.front(); }
  int num_model_inputs() const { return num_model_inputs_; }
  const FunctionDef* Function(const std::string& name) const;

  // The `i`-th data input of `node` (control inputs "^x" skipped), as a value of `frame`.
  static absl::StatusOr<std::string> Input(const NodeDef& node, int i);
  // Where `value` of `frame` is made (at most kMaxDepth hops).
  absl::StatusOr<Source> Trace(const Frame& frame, const std::string& value);
  // Trace() of node's i-th data input.
  absl::StatusOr<Source> TraceInput(const Frame& frame, const NodeDef& node, int i);
  // A new frame for a call of `fn` by `call` in `caller` (kept alive by this graph).
  absl::StatusOr<const Frame*> Enter(const Frame* caller, const NodeDef* call,
                                     const std::string& fn);

 private:
  FunctionGraph() = default;

  std::map<std::string, const FunctionDef*> functions_;
  std::map<const FunctionDef*, std::unique_ptr<FunctionIndex>> indexes_;
  std::vector<int> bound_inputs_;
  int num_model_inputs_ = 0;
  // Frames are made as the walk enters calls; pointers stay valid (deque, never erased).
  std::deque<std::unique_ptr<Frame>> frames_;
};

// A value name split: "split:output:2" -> {"split", "output", 2}; an input arg name (no ':')
// gives {name, "", -1}.
struct ValueName {
  std::string node;
  std::string output_arg;
  int index = -1;
};
ValueName ParseValue(const std::string& value);

}  // namespace rnnserve::models::savedmodel
