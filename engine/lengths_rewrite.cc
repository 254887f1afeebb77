#include "engine/lengths_rewrite.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/plan/lengths_rules.h"

namespace rnnserve::engine {
namespace {

using plan::OpVerdict;
using plan::SeqInfo;

// Values from which a model output is computed through data, not only through recurrent
// layers' initial states (h0 / c0 inputs feed only those).
std::vector<bool> FeedsData(const Model& m) {
  std::vector<bool> feeds(m.num_values, false);
  for (int v : m.output_values) feeds[v] = true;
  for (auto it = m.layers.rbegin(); it != m.layers.rend(); ++it) {
    const bool used = std::any_of(it->outputs.begin(), it->outputs.end(),
                                  [&](int v) { return v >= 0 && feeds[v]; });
    if (!used || it->inputs.empty()) continue;
    if (std::holds_alternative<RecurrentSpec>(it->spec)) {
      feeds[it->inputs[0]] = true;
    } else {
      for (int v : it->inputs) {
        if (v >= 0) feeds[v] = true;
      }
    }
  }
  return feeds;
}

SeqInfo ConstantInfo(const Tensor& t) {
  SeqInfo s = SeqInfo::Exact(t.rank());
  if (t.dtype() == DType::kInt64 && t.rank() <= 1) {
    s.ints.assign(t.ints().begin(), t.ints().end());
    s.ints_known = true;
  }
  return s;
}

// Layers that read the lengths a value carries (Value::lengths) from their input.
bool ReadsLengths(const LayerSpec& spec) {
  return std::holds_alternative<RecurrentSpec>(spec) || std::holds_alternative<MaskingSpec>(spec) ||
         std::holds_alternative<EmbeddingSpec>(spec) ||
         std::holds_alternative<GlobalPool1DSpec>(spec);
}

class Rewriter {
 public:
  Rewriter(const Model& model, bool time_major) : in_(model), time_major_(time_major) {}
  LengthsRewrite Run();
  // A recurrent layer read its sequence time-major: worth trying the inputs that way.
  bool saw_time_major() const { return saw_time_major_; }

 private:
  void Refuse(const Layer& layer, const std::string& why);
  // A kAttachRequestLengths of `value` before `layer`; returns the new value.
  int Attach(const Layer& layer, int value);
  void VisitTensorOp(Layer layer, const TensorOpSpec& op);
  void VisitRecurrent(Layer layer, const RecurrentSpec& rnn);
  void VisitOther(Layer layer);
  void ZeroOutput(size_t k);

  const Model& in_;
  const bool time_major_;  // the sequence inputs are [T, B, ...]
  bool saw_time_major_ = false;
  Model out_;
  std::vector<SeqInfo> info_;  // per value, as the rules in plan/lengths_rules.h see it
  int source_ = -1;            // the first sequence input: its Value::lengths are the request's
  absl::Status honored_;
};

void Rewriter::Refuse(const Layer& layer, const std::string& why) {
  if (!honored_.ok()) return;
  honored_ = absl::InvalidArgumentError(
      absl::StrCat("lengths: the model cannot apply per-sequence lengths: layer '", layer.name,
                   "' (", layer.source_class, ") ", why, "; send whole sequences without lengths"));
}

int Rewriter::Attach(const Layer& layer, int value) {
  Layer attach;
  attach.name = layer.name + "/request_lengths";
  attach.source_class = layer.source_class;
  attach.spec = TensorOpSpec{.kind = TensorOpKind::kAttachRequestLengths,
                             .operands = {TensorOperand{}, TensorOperand{}}};
  attach.inputs = {value, source_};
  attach.outputs = {out_.num_values++};
  const SeqInfo& x = info_[value];
  info_.push_back(SeqInfo::Steps(x.rank, x.batch, x.time, /*native=*/true));
  out_.layers.push_back(std::move(attach));
  return out_.num_values - 1;
}

void Rewriter::VisitTensorOp(Layer layer, const TensorOpSpec& op) {
  std::deque<SeqInfo> constants;  // stable addresses
  std::vector<const SeqInfo*> operands;
  size_t next = 0;
  for (const TensorOperand& o : op.operands) {
    if (o.source == TensorOperand::Source::kInput && next < layer.inputs.size()) {
      operands.push_back(&info_[layer.inputs[next++]]);
    } else if (o.source == TensorOperand::Source::kConstant) {
      constants.push_back(ConstantInfo(o.constant));
      operands.push_back(&constants.back());
    } else {
      operands.push_back(nullptr);
    }
  }
  OpVerdict v = plan::ClassifyTensorOp(op, operands, static_cast<int>(layer.outputs.size()));
  if (!v.mixes.empty()) Refuse(layer, v.mixes);
  if (v.last_step && !op.operands.empty() &&
      op.operands[0].source == TensorOperand::Source::kInput) {
    layer.spec = TensorOpSpec{.kind = TensorOpKind::kGatherAtLengths,
                              .operands = {TensorOperand{}, TensorOperand{}},
                              .axis = v.time,
                              .ints = {v.batch},
                              .keep_dims = v.keep_dims};
    layer.inputs = {layer.inputs[0], source_};
  }
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    info_[layer.outputs[i]] = v.outs[std::min(i, v.outs.size() - 1)];
  }
  out_.layers.push_back(std::move(layer));
}

void Rewriter::VisitRecurrent(Layer layer, const RecurrentSpec& rnn) {
  const SeqInfo x = info_[layer.inputs[0]];
  bool mixed = x.kind == SeqInfo::Kind::kMixed;
  if (x.steps()) {
    if (x.rank != 3 || x.batch != 0 || x.time != 1) {
      saw_time_major_ |= x.batch == 1 && x.time == 0;
      Refuse(layer, x.batch == 1 && x.time == 0
                        ? "reads its sequences time-major ([time, batch, features]); lengths "
                          "need a batch-first model input (PyTorch: batch_first=True)"
                        : "reads a sequence whose batch and time axes it cannot place");
      mixed = true;
    } else if (!x.native) {
      layer.inputs[0] = Attach(layer, layer.inputs[0]);
    }
  }
  for (size_t i = 1; i < layer.inputs.size(); ++i) {
    if (!info_[layer.inputs[i]].exact()) {
      if (info_[layer.inputs[i]].kind != SeqInfo::Kind::kMixed) {
        Refuse(layer, "starts from a state computed from the padded steps");
      }
      mixed = true;
    }
  }
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    SeqInfo out = SeqInfo::Exact(2);
    if (mixed) {
      out = SeqInfo::Mixed();
    } else if (i == 0 && rnn.return_sequences) {
      out = x.steps() ? SeqInfo::Steps(3, 0, 1, /*native=*/true) : SeqInfo::Exact(3);
    }
    info_[layer.outputs[i]] = out;
  }
  out_.layers.push_back(std::move(layer));
}

void Rewriter::VisitOther(Layer layer) {
  if (!layer.inputs.empty() && ReadsLengths(layer.spec)) {
    const SeqInfo& x = info_[layer.inputs[0]];
    if (x.steps() && !x.native && x.batch == 0 && x.time == 1) {
      layer.inputs[0] = Attach(layer, layer.inputs[0]);
    }
  }
  std::vector<const SeqInfo*> ins;
  for (int v : layer.inputs) ins.push_back(v >= 0 ? &info_[v] : nullptr);
  OpVerdict v = plan::ClassifyLayer(layer.spec, ins);
  if (!v.mixes.empty()) Refuse(layer, v.mixes);
  for (size_t i = 0; i < layer.outputs.size(); ++i) {
    info_[layer.outputs[i]] = v.outs[std::min(i, v.outs.size() - 1)];
  }
  out_.layers.push_back(std::move(layer));
}

// ONNX's rule for outputs with a time axis: zero past each sequence's length.
void Rewriter::ZeroOutput(size_t k) {
  const int value = out_.output_values[k];
  const SeqInfo x = info_[value];
  Layer zero;
  zero.name = "output/" + out_.outputs[k].name + "/zero_past_lengths";
  zero.source_class = "rnnserve::ZeroPastLengths";
  zero.spec = TensorOpSpec{.kind = TensorOpKind::kZeroPastLengths,
                           .operands = {TensorOperand{}, TensorOperand{}},
                           .axis = x.time,
                           .ints = {x.batch}};
  zero.inputs = {value, source_};
  zero.outputs = {out_.num_values++};
  info_.push_back(x);
  out_.output_values[k] = zero.outputs[0];
  out_.layers.push_back(std::move(zero));
}

LengthsRewrite Rewriter::Run() {
  LengthsRewrite result;
  out_ = in_;
  out_.layers.clear();
  info_.assign(in_.num_values, SeqInfo::Exact());
  const std::vector<bool> feeds = FeedsData(in_);
  for (size_t i = 0; i < in_.inputs.size(); ++i) {
    const ValueInfo& vi = in_.inputs[i];
    const int rank = static_cast<int>(vi.shape.size());
    const bool seq = feeds[i] && (rank >= 3 || (rank == 2 && vi.dtype == DType::kInt64));
    result.sequence_inputs.push_back(seq);
    // The engines carry the request's lengths beside a batch-first input for the layers that
    // read them (Keras masks); a time-major one has them only for the lengths ops.
    info_[i] = !seq          ? SeqInfo::Exact(rank)
               : time_major_ ? SeqInfo::Steps(rank, 1, 0)
                             : SeqInfo::Steps(rank, 0, 1, /*native=*/true);
    if (seq && source_ < 0) source_ = static_cast<int>(i);
  }
  if (source_ < 0) {
    result.model = in_;
    result.honored = absl::InvalidArgumentError(
        "lengths: the model has no sequence input ([batch, time, features] or [batch, time] "
        "token ids) for per-sequence lengths to apply to");
    return result;
  }
  for (const Layer& layer : in_.layers) {
    if (const auto* op = std::get_if<TensorOpSpec>(&layer.spec)) {
      VisitTensorOp(layer, *op);
    } else if (const auto* rnn = std::get_if<RecurrentSpec>(&layer.spec)) {
      VisitRecurrent(layer, *rnn);
    } else {
      VisitOther(layer);
    }
  }
  for (size_t k = 0; k < out_.output_values.size(); ++k) {
    const SeqInfo& x = info_[out_.output_values[k]];
    if (x.kind == SeqInfo::Kind::kShape && honored_.ok()) {
      honored_ = absl::InvalidArgumentError(
          absl::StrCat("lengths: the model cannot apply per-sequence lengths: output '",
                       out_.outputs[k].name, "' is computed from the padded length"));
    }
    if (x.steps() && in_.source_format == "onnx") ZeroOutput(k);
  }
  result.honored = honored_;
  result.time_major = time_major_;
  result.model = honored_.ok() ? std::move(out_) : in_;
  return result;
}

}  // namespace

LengthsRewrite RewriteForLengths(const Model& model) {
  Rewriter batch_first(model, /*time_major=*/false);
  LengthsRewrite result = batch_first.Run();
  if (result.honored.ok() || !batch_first.saw_time_major()) return result;
  LengthsRewrite time_major = Rewriter(model, /*time_major=*/true).Run();
  return time_major.honored.ok() ? time_major : result;
}

}  // namespace rnnserve::engine
