#include "models/savedmodel/function_graph.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::models::savedmodel {
namespace {

constexpr int kMaxDepth = 256;       // hops of one Trace()
constexpr size_t kMaxFrames = 4096;  // calls entered in one walk

bool IsCall(const std::string& op) {
  return op == "StatefulPartitionedCall" || op == "PartitionedCall";
}

bool IsWhile(const std::string& op) { return op == "While" || op == "StatelessWhile"; }

}  // namespace

ValueName ParseValue(const std::string& value) {
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  ValueName v;
  v.node = parts[0];
  if (parts.size() == 3 && absl::SimpleAtoi(parts[2], &v.index)) {
    v.output_arg = parts[1];
  } else if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &v.index)) {
    v.output_arg = "output";  // graph-level "node:0"
  } else {
    v.index = -1;
  }
  return v;
}

absl::StatusOr<FunctionGraph> FunctionGraph::Create(const MetaGraphDef& mg,
                                                    const std::string& top) {
  FunctionGraph g;
  for (const FunctionDef& f : mg.graph_def().library().function()) {
    g.functions_[f.signature().name()] = &f;
  }
  const FunctionDef* fn = g.Function(top);
  if (!fn) {
    return absl::InvalidArgumentError(absl::StrCat("the serving signature calls function '", top,
                                                   "', which is not in the graph"));
  }
  auto cf = mg.object_graph_def().concrete_functions().find(top);
  if (cf != mg.object_graph_def().concrete_functions().end()) {
    g.bound_inputs_.assign(cf->second.bound_inputs().begin(), cf->second.bound_inputs().end());
  }
  g.num_model_inputs_ = fn->signature().input_arg_size() - static_cast<int>(g.bound_inputs_.size());
  if (g.num_model_inputs_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "function '", top, "' captures more objects than it has inputs (object graph mismatch)"));
  }
  auto frame = g.Enter(nullptr, nullptr, top);
  if (!frame.ok()) return frame.status();
  return g;
}

const FunctionDef* FunctionGraph::Function(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second;
}

absl::StatusOr<const Frame*> FunctionGraph::Enter(const Frame* caller, const NodeDef* call,
                                                  const std::string& fn) {
  const FunctionDef* f = Function(fn);
  if (!f)
    return absl::InvalidArgumentError(absl::StrCat("function '", fn, "' is not in the graph"));
  if (frames_.size() >= kMaxFrames) {
    return absl::InvalidArgumentError("the serving function calls too many functions");
  }
  auto frame = std::make_unique<Frame>();
  frame->fn = f;
  frame->caller = caller;
  frame->call = call;
  std::unique_ptr<FunctionIndex>& index = indexes_[f];
  if (!index) {
    index = std::make_unique<FunctionIndex>();
    for (const NodeDef& n : f->node_def()) index->nodes[n.name()] = &n;
    for (int i = 0; i < f->signature().input_arg_size(); ++i) {
      index->args[f->signature().input_arg(i).name()] = i;
    }
  }
  frame->index = index.get();
  frames_.push_back(std::move(frame));
  return frames_.back().get();
}

absl::StatusOr<std::string> FunctionGraph::Input(const NodeDef& node, int i) {
  int seen = 0;
  for (const std::string& in : node.input()) {
    if (!in.empty() && in[0] == '^') continue;
    if (seen++ == i) return in;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("node '", node.name(), "' (", node.op(), ") has no input ", i));
}

absl::StatusOr<Source> FunctionGraph::TraceInput(const Frame& frame, const NodeDef& node, int i) {
  auto in = Input(node, i);
  if (!in.ok()) return in.status();
  return Trace(frame, *in);
}

absl::StatusOr<Source> FunctionGraph::Trace(const Frame& start, const std::string& start_value) {
  const Frame* frame = &start;
  std::string value = start_value;
  bool read = false;
  for (int hop = 0; hop < kMaxDepth; ++hop) {
    const ValueName v = ParseValue(value);
    if (v.index < 0) {  // an input arg of `frame`
      auto arg = frame->index->args.find(value);
      if (arg == frame->index->args.end()) {
        return absl::InvalidArgumentError(absl::StrCat("function '", frame->fn->signature().name(),
                                                       "' uses '", value, "', which it lacks"));
      }
      if (!frame->caller) {
        Source s;
        s.read = read;
        if (arg->second < num_model_inputs_) {
          s.kind = Source::Kind::kModelInput;
          s.index = arg->second;
        } else {
          s.kind = Source::Kind::kObject;
          s.index = bound_inputs_[arg->second - num_model_inputs_];
        }
        return s;
      }
      if (IsWhile(frame->call->op())) {
        // Only a loop-invariant arg (the body returns it unchanged) is the While's input.
        const auto& sig = frame->fn->signature();
        auto ret = sig.output_arg_size() > arg->second
                       ? frame->fn->ret().find(sig.output_arg(arg->second).name())
                       : frame->fn->ret().end();
        if (ret == frame->fn->ret().end() || ret->second != value) {
          return absl::InvalidArgumentError(absl::StrCat(
              "loop variable '", value, "' of '", sig.name(), "' changes from step to step"));
        }
      }
      auto in = Input(*frame->call, arg->second);
      if (!in.ok()) return in.status();
      value = *in;
      frame = frame->caller;
      continue;
    }
    auto it = frame->index->nodes.find(v.node);
    if (it == frame->index->nodes.end()) {
      return absl::InvalidArgumentError(absl::StrCat("function '", frame->fn->signature().name(),
                                                     "' has no node '", v.node, "'"));
    }
    const NodeDef& node = *it->second;
    if (node.op() == "Identity" || node.op() == "ReadVariableOp" || node.op() == "IdentityN") {
      read |= node.op() == "ReadVariableOp";
      auto in = Input(node, node.op() == "IdentityN" ? v.index : 0);
      if (!in.ok()) return in.status();
      value = *in;
      continue;
    }
    if (IsCall(node.op())) {
      auto f = node.attr().find("f");
      if (f == node.attr().end() || !f->second.has_func()) {
        return absl::InvalidArgumentError(
            absl::StrCat("call '", node.name(), "' names no function"));
      }
      auto callee = Enter(frame, &node, f->second.func().name());
      if (!callee.ok()) return callee.status();
      const auto& sig = (*callee)->fn->signature();
      if (v.index >= sig.output_arg_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", value, "': function '", sig.name(), "' has fewer outputs"));
      }
      auto ret = (*callee)->fn->ret().find(sig.output_arg(v.index).name());
      if (ret == (*callee)->fn->ret().end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("function '", sig.name(), "' does not return its output ", v.index));
      }
      frame = *callee;
      value = ret->second;
      continue;
    }
    Source s;
    s.kind = Source::Kind::kNode;
    s.frame = frame;
    s.node = &node;
    s.output = v.index;
    s.output_arg = v.output_arg;
    s.read = read;
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", start_value, "' passes through more than ", kMaxDepth, " nodes"));
}

}  // namespace rnnserve::models::savedmodel
