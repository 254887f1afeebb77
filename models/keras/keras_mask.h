#pragma once

// Keras masks in functional configs, mapped onto the masks the IR carries with its values.
//
// The IR has no mask tensors: a Masking layer marks the steps whose features all equal
// mask_value, Embedding(mask_zero=True) the steps whose id is 0, and the engines pass that mask
// on through per-step layers (Dense, Activation, Dropout-like, normalisation, Softmax), a
// recurrent layer's returned sequences and merges of equally masked inputs, to every layer that
// reads it (engine/cpu/layers.h, engine/cpu/shape_layers.h).
//
// Keras 3 writes the same mask explicitly: its functional configs record Masking's compute_mask
// as op layers (module keras.src.ops.*) `Any(NotEqual(x, mask_value), axis=-1)`,
// Embedding's as `NotEqual(ids, 0)`, a merge's as `LogicalOr` (Add, Multiply...) or
// `Any(Concatenate([LogicalOr(ExpandDims(m, -1), ZerosLike(y)), ...], -1), -1)` (Concatenate),
// and hands the result to the next layers' `mask` argument. This file evaluates those op layers
// symbolically: a mask they compute is accepted where it is exactly the mask the IR gives the
// layer's input (or, for a recurrent layer whose input carries none, the mask of a Masking
// layer put in front of it); any other op, or a mask computed any other way, is refused at load
// naming the layer that reads it and the op.

#include <optional>
#include <string>
#include <vector>

#include "engine/ir.h"
#include "models/keras/keras_json.h"

namespace rnnserve::models::keras {

// A step mask [B, T] as the IR makes it.
struct MaskOrigin {
  enum class Kind {
    kAnyFeature,  // Masking: any(x[b, t, :] != value), x [B, T, F]
    kIds,         // Embedding(mask_zero): ids[b, t] != value (0), ids [B, T]
    kOther,       // a mask the importer cannot describe (a merge of differently masked inputs)
  };
  Kind kind = Kind::kOther;
  int source = -1;  // IR value id the comparison reads
  float value = 0.0f;
  bool operator==(const MaskOrigin&) const = default;
};

// A value computed by Keras 3 op layers (boolean; never an IR value).
struct SymbolicMask {
  enum class Form {
    kFeatureNotEqual,  // x != value over [B, T, F] (not yet reduced over features)
    kSteps,            // [B, T]: the OR of `any_of`
    kStepsBroadcast,   // [B, T, k]: the OR of `any_of`, broadcast over the last axis
    kFalse,            // all false (ZerosLike(..., dtype=bool))
    kUnsupported,      // `why` says what
  };
  Form form = Form::kUnsupported;
  std::vector<MaskOrigin> any_of;  // distinct entries
  MaskOrigin not_equal;            // kFeatureNotEqual: {kAnyFeature, x, value}
  std::string why;
};

// One operand of an op layer: an IR value, a symbolic mask, or a number.
struct MaskOperand {
  int value = -1;  // IR value id, or -1
  int rank = -1;   // of `value`, batch axis included; -1 where unknown
  const SymbolicMask* symbolic = nullptr;
  std::optional<double> scalar;
};

// True for a Keras 3 op layer (an Operation serialised in a functional config), in a file
// written by Keras `keras_major`.
bool IsOpLayer(const Json& layer, int keras_major);

// Evaluates op layer `name` of class `cls` over its operands (a list argument flattened).
SymbolicMask EvalMaskOp(const std::string& name, const std::string& cls, const Json& config,
                        const std::vector<MaskOperand>& operands);

// The mask the IR gives output `output_index` of a layer with `spec` reading `inputs`, whose
// masks are `input_masks` (one per input).
std::optional<MaskOrigin> OutputMask(const engine::LayerSpec& spec,
                                     const std::vector<std::optional<MaskOrigin>>& input_masks,
                                     int input_value, int output_index);

// Human-readable description for messages, e.g. "Masking(mask_value=0) of value 0".
std::string DescribeMask(const std::optional<MaskOrigin>& mask);

}  // namespace rnnserve::models::keras
