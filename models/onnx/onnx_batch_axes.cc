// Where the batch axis of the graph's inputs and outputs lies.
//
// ONNX files give no batch axis; the recurrent nodes fix one. X is [T, B, I] (layout 0) or
// [B, T, I] (layout 1); initial_h / initial_c and Y_h / Y_c are [D, B, H] (layout 1:
// [B, D, H]); Y is [T, D, B, H] ([B, T, D, H]). torch.onnx.export always writes layout 0, with
// a Transpose in front of X for batch_first modules and a Slice per layer of h0 / c0
// ([num_layers * D, B, H], batch on axis 1). Inputs are traced back from the recurrent nodes
// and outputs back to them through the ops that move axes predictably; anything else leaves
// the axis unknown (axis 0, as before).

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "models/onnx/onnx_graph.h"

namespace rnnserve::models::onnx {
namespace {

bool IsRecurrent(const std::string& op) { return op == "LSTM" || op == "GRU" || op == "RNN"; }

// Ops whose output has the input's axes, in the input's order (operand 0).
bool KeepsAxes(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Identity", "Cast", "Dropout", "Slice", "Relu", "Tanh", "Sigmoid", "Neg", "Abs",
  };
  return kOps.count(op) > 0;
}

class Tracer {
 public:
  explicit Tracer(const GraphProto& graph) : graph_(graph) {
    std::set<std::string> initializers;
    for (const TensorProto& t : graph.initializer()) initializers.insert(t.name());
    for (const ValueInfoProto& in : graph.input()) {
      if (!initializers.count(in.name())) inputs_.insert(in.name());
    }
    for (int n = 0; n < graph.node_size(); ++n) {
      for (const std::string& out : graph.node(n).output()) producer_[out] = n;
    }
  }

  // Records that tensor `name` holds the batch on `axis`, for the graph input it comes from.
  void TraceToInput(const std::string& name, int64_t axis, int depth = 0) {
    if (axis < 0 || depth > 64) return;
    if (inputs_.count(name)) {
      auto [it, fresh] = input_axes_.emplace(name, axis);
      if (!fresh && it->second != axis) it->second = -1;  // uses disagree: unknown
      return;
    }
    auto p = producer_.find(name);
    if (p == producer_.end()) return;
    const NodeProto& node = graph_.node(p->second);
    if (node.input_size() == 0) return;
    if (node.op_type() == "Transpose") {
      const std::vector<int64_t> perm = NodeAttributes(node).Ints("perm");
      if (axis < static_cast<int64_t>(perm.size()))
        TraceToInput(node.input(0), perm[axis], depth + 1);
    } else if (KeepsAxes(node.op_type())) {
      TraceToInput(node.input(0), axis, depth + 1);
    }
  }

  // The batch axis of tensor `name`, traced back to a recurrent node or a graph input.
  std::optional<int64_t> AxisOf(const std::string& name, int depth = 0) const {
    if (depth > 64) return std::nullopt;
    if (auto in = input_axes_.find(name); in != input_axes_.end()) {
      if (in->second >= 0) return in->second;
      return std::nullopt;
    }
    auto p = producer_.find(name);
    if (p == producer_.end()) return std::nullopt;
    const NodeProto& node = graph_.node(p->second);
    const std::string& op = node.op_type();
    if (IsRecurrent(op)) {
      const bool time_major = NodeAttributes(node).Int("layout", 0) == 0;
      if (node.output_size() > 0 && node.output(0) == name) return time_major ? 2 : 0;  // Y
      return time_major ? 1 : 0;                                                        // Y_h, Y_c
    }
    if (node.input_size() == 0) return std::nullopt;
    if (op == "Transpose") {
      const std::vector<int64_t> perm = NodeAttributes(node).Ints("perm");
      const auto k = AxisOf(node.input(0), depth + 1);
      if (!k) return std::nullopt;
      const auto at = std::find(perm.begin(), perm.end(), *k);
      if (at == perm.end()) return std::nullopt;
      return static_cast<int64_t>(at - perm.begin());
    }
    if (KeepsAxes(op)) return AxisOf(node.input(0), depth + 1);
    if (op == "Concat") {
      const int64_t joined = NodeAttributes(node).Int("axis", 0);
      std::optional<int64_t> k;
      for (const std::string& in : node.input()) {
        const auto a = AxisOf(in, depth + 1);
        if (!a || (k && *k != *a) || *a == joined) return std::nullopt;
        k = a;
      }
      return k;
    }
    return std::nullopt;
  }

  const std::map<std::string, int64_t>& input_axes() const { return input_axes_; }

 private:
  const GraphProto& graph_;
  std::set<std::string> inputs_;               // runtime graph inputs
  std::map<std::string, int> producer_;        // tensor -> index of the node writing it
  std::map<std::string, int64_t> input_axes_;  // graph input -> batch axis (-1: conflicting)
};

}  // namespace

BatchAxes FindBatchAxes(const GraphProto& graph) {
  Tracer tracer(graph);
  for (const NodeProto& node : graph.node()) {
    if (!IsRecurrent(node.op_type())) continue;
    const int64_t batch = NodeAttributes(node).Int("layout", 0) == 0 ? 1 : 0;
    for (int i : {0, 5, 6}) {  // X, initial_h, initial_c
      if (i < node.input_size() && !node.input(i).empty())
        tracer.TraceToInput(node.input(i), batch);
    }
  }
  BatchAxes axes;
  for (const auto& [name, axis] : tracer.input_axes()) {
    if (axis > 0) axes.inputs[name] = static_cast<int>(axis);
  }
  for (const ValueInfoProto& out : graph.output()) {
    if (const auto axis = tracer.AxisOf(out.name()); axis && *axis > 0) {
      axes.outputs[out.name()] = static_cast<int>(*axis);
    }
  }
  return axes;
}

}  // namespace rnnserve::models::onnx
