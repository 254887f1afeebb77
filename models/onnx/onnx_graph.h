#pragma once

// The state of one ONNX graph being turned into engine IR, shared by the node importers.
//
// Every ONNX tensor name resolves to a Ref: a constant (an initializer, a Constant node, or
// anything computed from those and nothing else, folded at load) or a runtime value of the
// Model. Emit() adds a generic tensor op, folding it on the spot when its operands are all
// constants; so shape arithmetic on weights never reaches the engine.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir.h"
#include "engine/tensor.h"
#include "models/onnx/onnx.pb.h"

namespace rnnserve::models::onnx {

// A resolved operand: a runtime value id, a constant, or absent (an empty optional input).
struct Ref {
  int id = -1;                   // runtime value id, or -1
  bool absent = false;           // an optional input left empty
  engine::Tensor constant = {};  // when id < 0 and !absent
  bool is_constant() const { return id < 0 && !absent; }
};

// Typed access to a node's attributes.
class NodeAttributes {
 public:
  explicit NodeAttributes(const NodeProto& node);
  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }
  int64_t Int(const std::string& name, int64_t fallback) const;
  float Float(const std::string& name, float fallback) const;
  std::string String(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name) const;
  std::vector<float> Floats(const std::string& name) const;
  std::vector<std::string> Strings(const std::string& name) const;
  const TensorProto* Tensor(const std::string& name) const;

 private:
  std::map<std::string, const AttributeProto*> by_name_;
};

class GraphBuilder {
 public:
  GraphBuilder(engine::Model* model, int opset) : model_(model), opset_(opset) {}

  int opset() const { return opset_; }
  engine::Model& model() { return *model_; }

  // Binds an ONNX name; a name bound twice is an error (ONNX graphs are SSA).
  absl::Status Bind(const std::string& name, Ref ref);
  // Resolves an input name; "" is absent; an unknown name is an error naming it.
  absl::StatusOr<Ref> Resolve(const std::string& name) const;
  int NewValue() { return model_->num_values++; }

  // Adds `spec` over `operands` (their Source fields are filled here) as a layer named `name`,
  // or folds it when every present operand is constant. Returns one Ref per op output.
  absl::StatusOr<std::vector<Ref>> Emit(engine::TensorOpSpec spec, const std::vector<Ref>& operands,
                                        const std::string& name, const std::string& source_class);
  // Emit for single-output ops.
  absl::StatusOr<Ref> Emit1(engine::TensorOpSpec spec, const std::vector<Ref>& operands,
                            const std::string& name, const std::string& source_class);
  // A runtime value id for `ref`; a constant becomes a kConstant layer ordered after value 0.
  absl::StatusOr<int> Materialize(const Ref& ref, const std::string& name);
  // Adds a layer (its outputs must be fresh value ids).
  void AddLayer(engine::Layer layer) { model_->layers.push_back(std::move(layer)); }

 private:
  engine::Model* const model_;
  const int opset_;
  std::map<std::string, Ref> refs_;
};

// Imports one node that is not a recurrent cell; unsupported ops fail naming node, op type and
// opset.
absl::Status ImportNode(const NodeProto& node, GraphBuilder* builder);

// Imports an LSTM, GRU or RNN node (onnx_recurrent.cc).
absl::Status ImportRecurrentNode(const NodeProto& node, GraphBuilder* builder);

// Where the graph's inputs and outputs hold the batch, where that is not axis 0
// (onnx_batch_axes.cc): [D, B, H] states of time-major recurrent nodes, time-major inputs.
struct BatchAxes {
  std::map<std::string, int> inputs;   // graph input name -> batch axis (> 0)
  std::map<std::string, int> outputs;  // graph output name -> batch axis (> 0)
};
BatchAxes FindBatchAxes(const GraphProto& graph);

// Whether `ref` is all zeros whatever the batch: a zero constant, or a runtime value made by
// ConstantOfShape(0) / Expand(0) and reshaped or sliced (the exporter's zero initial state,
// onnx_zero_state.cc).
bool IsZeroTensor(const Ref& ref, const engine::Model& model);

// Drops generic tensor-op layers whose outputs no layer and no model output reads.
void DropUnusedTensorOps(engine::Model* model);

// An empty layer with its name and class.
engine::Layer NewLayer(const std::string& name, const std::string& source_class);

// "node 'name' (OpType)" for error messages.
std::string NodeLabel(const NodeProto& node);

}  // namespace rnnserve::models::onnx
