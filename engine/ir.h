#pragma once

// The model IR: what every importer (models/) writes and every engine compiles.
//
// A Model is a list of layers in topological order over numbered values. Model inputs are
// values too. Sequential files give a chain; functional files give a small DAG.
//
// Recurrent weights use one canonical layout for every source format, per direction:
//   W  [G*H, I]   input weights, row-major
//   R  [G*H, H']  recurrent weights (H' = proj_size when projecting, else H)
//   bW [G*H]      input bias
//   bR [G*H]      recurrent bias
//   P  [proj, H]  optional LSTM projection (PyTorch proj_size)
//   peephole [3H] optional LSTM peepholes, in the order i, f, o
// Gate order is cuDNN's: LSTM i, f, g, o (G = 4); GRU r, z, n (G = 3); simple RNN (G = 1).
// Importers convert from their source's order; nothing downstream knows a file format.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

enum class ActivationKind {
  kLinear,
  kSigmoid,
  kTanh,
  kRelu,
  kHardSigmoid,      // clip(alpha*x + beta, 0, 1)
  kLeakyRelu,        // x >= 0 ? x : alpha*x
  kThresholdedRelu,  // x > alpha ? x : 0
  kScaledTanh,       // alpha * tanh(beta * x)
  kAffine,           // alpha * x + beta
  kElu,              // x >= 0 ? x : alpha*(exp(x) - 1)
  kSoftsign,         // x / (1 + |x|)
  kSoftplus,         // log(1 + exp(x))
  kSelu,
  kGelu,   // exact (erf) form
  kSwish,  // x * sigmoid(x)
  kExponential,
  kSoftmax,  // over the last axis; only outside recurrent cells
};

struct Activation {
  ActivationKind kind = ActivationKind::kLinear;
  float alpha = 0.0f;
  float beta = 0.0f;

  static Activation Of(ActivationKind kind, float alpha = 0.0f, float beta = 0.0f) {
    return Activation{kind, alpha, beta};
  }
  // Keras 2 (and tf.keras): clip(0.2x + 0.5, 0, 1).
  static Activation HardSigmoidKeras2() { return Of(ActivationKind::kHardSigmoid, 0.2f, 0.5f); }
  // Keras 3: clip(x/6 + 0.5, 0, 1).
  static Activation HardSigmoidKeras3() {
    return Of(ActivationKind::kHardSigmoid, 1.0f / 6.0f, 0.5f);
  }
  bool operator==(const Activation&) const = default;
};

std::string ActivationName(const Activation& a);

enum class CellType { kLstm, kGru, kSimpleRnn };
enum class MergeMode { kConcat, kSum, kMul, kAve, kNone };

// What happens past a sequence's length.
enum class MaskSemantics {
  kKeras,  // a masked step carries the state and repeats the last output
  kOnnx,   // sequence_lens: outputs past the length are zero
};

std::string CellTypeName(CellType cell);
std::string MergeModeName(MergeMode mode);
std::string MaskSemanticsName(MaskSemantics m);

// One direction of a recurrent layer.
struct RecurrentDirection {
  // Process each sequence's valid steps from its last to its first.
  bool reverse = false;
  // Keras go_backwards outside Bidirectional: outputs stay in processing order (position s
  // holds the output after s+1 reversed steps of the padded sequence), instead of being placed
  // at the time index of the step they came from (ONNX reverse, Bidirectional's backward half).
  bool outputs_in_processing_order = false;
  // LSTM: f = gates i, f, o; g = cell candidate; h = output (ONNX f, g, h).
  // GRU:  f = gates r, z;    g = candidate n.   Simple RNN: f only.
  Activation f = Activation::Of(ActivationKind::kSigmoid);
  Activation g = Activation::Of(ActivationKind::kTanh);
  Activation h = Activation::Of(ActivationKind::kTanh);
  std::vector<float> W;         // [G*H, I]
  std::vector<float> R;         // [G*H, H'] (H' = proj_size or H)
  std::vector<float> bW;        // [G*H]
  std::vector<float> bR;        // [G*H]
  std::vector<float> P;         // [proj_size, H], empty without projection
  std::vector<float> peephole;  // [3H] i, f, o; empty without peepholes
};

struct RecurrentSpec {
  CellType cell = CellType::kLstm;
  int input_size = 0;         // I
  int hidden_size = 0;        // H
  int proj_size = 0;          // 0: no projection
  float clip = 0.0f;          // 0: no clipping of gate pre-activations
  bool input_forget = false;  // LSTM: f = 1 - i (ONNX input_forget)
  bool reset_after = true;    // GRU: reset applied after the recurrent matmul
  bool return_sequences = false;
  bool return_state = false;
  MergeMode merge = MergeMode::kConcat;  // bidirectional only
  MaskSemantics masking = MaskSemantics::kKeras;
  // Keras semantics only: masked steps output zeros instead of repeating the last output
  // (what Keras's Bidirectional forces on its layers when they return sequences).
  bool zero_output_for_mask = false;
  // 1 (forward or reverse) or 2 (bidirectional: forward, then backward).
  std::vector<RecurrentDirection> directions;

  int gates() const { return cell == CellType::kLstm ? 4 : cell == CellType::kGru ? 3 : 1; }
  int output_size() const { return proj_size > 0 ? proj_size : hidden_size; }
  // Validates sizes against the weights; the message names `layer`.
  absl::Status Validate(const std::string& layer) const;
};

// y = act(x . kernel + bias) over the last axis (also TimeDistributed(Dense)).
struct DenseSpec {
  int in = 0;
  int out = 0;
  std::vector<float> kernel;  // [in, out]
  std::vector<float> bias;    // [out] or empty
  Activation activation;
};

// Marks steps whose features all equal mask_value as padding (Keras Masking).
struct MaskingSpec {
  float mask_value = 0.0f;
};

struct EmbeddingSpec {
  int vocab = 0;
  int dim = 0;
  std::vector<float> table;  // [vocab, dim]
  bool mask_zero = false;
};

struct ActivationSpec {
  Activation activation;
};

// Identity at inference: Dropout, SpatialDropout1D, GaussianNoise, InputLayer...
struct IdentitySpec {};

// Softmax over one axis (negative counts from the end). Activation(softmax) uses axis -1.
struct SoftmaxSpec {
  int axis = -1;
};

// Inference-time batch normalisation over the last axis:
// y = gamma * (x - mean) / sqrt(var + epsilon) + beta.
struct BatchNormSpec {
  std::vector<float> gamma, beta, mean, variance;  // [C] each; gamma/beta may be empty
  float epsilon = 1e-3f;
};

// Layer normalisation over the last axis.
struct LayerNormSpec {
  std::vector<float> gamma, beta;  // [C] each; may be empty
  float epsilon = 1e-3f;
};

// 1-D convolution over the time axis of [B, T, Cin] -> [B, T', Cout].
struct Conv1DSpec {
  int in_channels = 0;
  int out_channels = 0;
  int kernel_size = 1;
  int stride = 1;
  int dilation = 1;
  enum class Padding { kValid, kSame, kCausal } padding = Padding::kValid;
  std::vector<float> kernel;  // [kernel_size, Cin, Cout] (Keras layout)
  std::vector<float> bias;    // [Cout] or empty
  Activation activation;
};

// MaxPooling1D / AveragePooling1D over the time axis.
struct Pool1DSpec {
  enum class Kind { kMax, kAverage } kind = Kind::kMax;
  int pool_size = 2;
  int stride = 2;
  bool same_padding = false;
};

// GlobalMax/GlobalAveragePooling1D: [B, T, C] -> [B, C]; masked steps are ignored (Keras).
struct GlobalPool1DSpec {
  enum class Kind { kMax, kAverage } kind = Kind::kAverage;
};

// Flatten to [B, -1].
struct FlattenSpec {};

// Reshape to [B, target...]; one entry may be -1.
struct ReshapeSpec {
  std::vector<int64_t> target;
};

// [B, C] -> [B, n, C].
struct RepeatVectorSpec {
  int n = 1;
};

// Functional merges of several inputs.
struct MergeSpec {
  enum class Kind { kConcatenate, kAdd, kSubtract, kMultiply, kAverage, kMaximum, kMinimum };
  Kind kind = Kind::kConcatenate;
  int axis = -1;  // concatenate only
};

// A layer an engine may not support yet; kept so compile can name it.
struct UnsupportedSpec {
  std::string reason;
};

// ---------------------------------------------------------------------------------------------
// Generic tensor ops, for graphs (ONNX) that compute around their recurrent layers: layout
// changes, shape arithmetic on int64 tensors, broadcast elementwise math. Each is one op over
// operands that are either runtime values (the layer's inputs, in order) or constants folded
// at load. Semantics follow the ONNX operator of the same name; engine/cpu/tensor_ops.h has the
// exact contract of each.
enum class TensorOpKind {
  kConstant,         // operand 0 (a constant); the layer's input only orders it
  kShape,            // int64 [rank] of operand 0
  kGather,           // axis; operands data, indices (int64)
  kConcat,           // axis
  kUnsqueeze,        // ints = axes
  kSqueeze,          // ints = axes (empty: every axis of size 1)
  kSlice,            // operands data, starts, ends, [axes], [steps]
  kTranspose,        // ints = perm (empty: reversed axes)
  kReshape,          // operands data, shape; allow_zero
  kExpand,           // operands data, shape (bidirectional broadcast)
  kCast,             // to
  kConstantOfShape,  // operand shape (int64); fill = value[0]
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMin,
  kMax,
  kMatMul,
  kGemm,        // alpha, beta, trans_a, trans_b; operands A, B, [C]
  kActivation,  // activation, elementwise
  kNeg,
  kAbs,
  kSqrt,
  kExp,
  kLog,
  kReciprocal,
  kSoftmax,     // axis; coerce_2d: ONNX opset < 13 (flatten at axis, softmax per row)
  kLogSoftmax,  // as kSoftmax
  kFlatten,     // axis
  kSplit,       // axis; ints = sizes of the outputs, or empty: num_outputs equal parts
  kReduceMean,  // ints = axes (empty: all), keep_dims
  kReduceSum,
  kReduceMax,
  kRange,  // operands start, limit, delta
  // Operand 0 flows through; operand 1 (int, [B]) becomes its per-sequence lengths, which a
  // following recurrent layer reads (ONNX sequence_lens).
  kAttachLengths,
  // The request's lengths (Batch::lengths), put in by engine/lengths_rewrite.h; operand 1 is
  // always a sequence model input, whose per-sequence lengths are the request's (none when the
  // request gives none). Each op reads the lengths beside operand 1, not its data.
  // Operand 0 [B, T, ...] flows through carrying the request's lengths (the shorter of them
  // and the ones it already carries, per sequence), as a recurrent layer reads them.
  kAttachRequestLengths,
  // Operand 0 with its time axis (`axis`) taken at each sequence's last step: step
  // lengths[b] - 1 of the sequence along batch axis ints[0] (step 0 for length 0; step T - 1
  // without lengths). keep_dims keeps the time axis with size 1.
  kGatherAtLengths,
  // Operand 0 with the steps at or past each sequence's length (time axis `axis`, batch axis
  // ints[0]) set to zero; unchanged without lengths.
  kZeroPastLengths,
};

std::string TensorOpName(TensorOpKind kind);

struct TensorOperand {
  enum class Source { kInput, kConstant, kAbsent };
  Source source = Source::kInput;
  Tensor constant = {};  // kConstant only
};

struct TensorOpSpec {
  TensorOpKind kind = TensorOpKind::kConstant;
  // One entry per operand; kInput entries take the layer's inputs in order.
  std::vector<TensorOperand> operands = {};
  int64_t axis = 0;
  std::vector<int64_t> ints = {};
  int num_outputs = 1;  // kSplit only
  bool keep_dims = true;
  bool allow_zero = false;
  bool coerce_2d = false;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 1.0f;
  Activation activation = {};
  DType to = DType::kFloat32;
  Tensor value = {};  // kConstantOfShape fill (one element; empty means float 0)
};

using LayerSpec = std::variant<RecurrentSpec, DenseSpec, MaskingSpec, EmbeddingSpec, ActivationSpec,
                               IdentitySpec, SoftmaxSpec, BatchNormSpec, LayerNormSpec, Conv1DSpec,
                               Pool1DSpec, GlobalPool1DSpec, FlattenSpec, ReshapeSpec,
                               RepeatVectorSpec, MergeSpec, UnsupportedSpec,
                               // Generic tensor ops (ONNX graphs).
                               TensorOpSpec>;

struct Layer {
  std::string name;          // as the source file names it
  std::string source_class;  // e.g. "LSTM", "CuDNNGRU", "onnx::LSTM"
  LayerSpec spec;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids (a recurrent layer with return_state has several)
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;  // -1 for dynamic axes
  // The axis of `shape` that holds the batch's rows (independent sequences): 0 for most; 1 for
  // ONNX's recurrent states [num_layers * num_directions, batch, hidden] and time-major
  // inputs [time, batch, features], as the importer traces them to the recurrent layers.
  int batch_axis = 0;
};

struct Model {
  std::string name;
  std::string source_format;       // "keras_h5", "keras", "onnx"
  std::string producer;            // e.g. "keras 2.15.0"
  std::vector<ValueInfo> inputs;   // value ids 0..inputs.size()-1
  std::vector<ValueInfo> outputs;  // shapes as known
  std::vector<int> output_values;  // value id of each output
  std::vector<Layer> layers;       // topological order
  int num_values = 0;

  // Checks value ids, topological order and every layer's own invariants.
  absl::Status Validate() const;
};

}  // namespace rnnserve::engine
