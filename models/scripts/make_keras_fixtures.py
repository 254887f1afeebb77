#!/usr/bin/env python3
"""Builds the Keras conformance corpus: small models with random weights, saved by real Keras.

Each case is built with tf-keras 2.x (saved as Keras 2 .h5) or Keras 3 (saved as .keras and as
Keras 3's legacy .h5), run by that Keras on random inputs, and stored under
tests/fixtures/keras/<CaseName>/ with its inputs and Keras's predictions. Expected outputs are
computed in float64 by a float64 copy of the model holding the same (float32) weights, so they
are the exact answer for the weights the file holds. tests/conformance/keras_conformance_test.cc
has one test per case, named like the case.

Files the reader must refuse (masks it cannot map exactly, initial states wired in the graph)
are saved under tests/fixtures/keras/refused/<CaseName>/ with the message their load must give
(the manifest's "refused" section).

The five real files in ../shared/models/keras-real/ get expected outputs too (random inputs of
their input shapes, predicted by the Keras line that loads each file) under
tests/fixtures/keras/real/<file stem>/. The files themselves stay outside the repository.

Needs: tensorflow-cpu 2.x with tf-keras (Keras 2) and keras 3 (PyPI), numpy, h5py.

  python3 models/scripts/make_keras_fixtures.py [--only CaseName ...]
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import h5py  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "keras"
REAL_DIR = ROOT.parent / "shared" / "models" / "keras-real"

CASES = {}


def case(name, line, formats=None, **opts):
    """Registers a builder for Keras `line` (2 or 3)."""

    def wrap(fn):
        CASES[name] = dict(build=fn, line=line, formats=formats, **opts)
        return fn

    return wrap


# ----------------------------------------------------------------------------- helpers


def seq_input(rng, b, t, f, lengths=None):
    """Random [b, t, f] float32 input; steps past lengths[i] are zero (padding)."""
    x = rng.normal(0.0, 1.0, size=(b, t, f)).astype(np.float32)
    if lengths is not None:
        for i, n in enumerate(lengths):
            x[i, n:, :] = 0.0
    return x


def token_input(rng, b, t, vocab, lengths=None):
    x = rng.integers(1, vocab, size=(b, t)).astype(np.int64)
    if lengths is not None:
        for i, n in enumerate(lengths):
            x[i, n:] = 0
    return x


def randomize(model, rng, scale=0.7):
    """Random (never constant) weights in [-scale, scale]; variances positive."""
    new = []
    for w in model.weights:
        shape = tuple(w.shape)
        name = w.name if hasattr(w, "name") else ""
        path = getattr(w, "path", name)
        if "variance" in path or "variance" in name:
            v = rng.uniform(0.5, 1.5, size=shape)
        else:
            v = rng.uniform(-scale, scale, size=shape)
        new.append(v.astype(np.float32))
    model.set_weights(new)


def to_float64(obj):
    if isinstance(obj, dict):
        return {k: to_float64(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_float64(v) for v in obj]
    if obj == "float32":
        return "float64"
    return obj


def predict64(k, model, inputs):
    """Predicts with a float64 copy of `model` holding the same weights."""
    cfg = to_float64(model.get_config())
    cls = k.Sequential if model.__class__.__name__ == "Sequential" else k.Model
    clone = cls.from_config(cfg)
    clone.set_weights([np.asarray(w, dtype=np.float64) for w in model.get_weights()])
    feed = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs]
    out = clone(feed if len(feed) > 1 else feed[0], training=False)
    outs = out if isinstance(out, (list, tuple)) else [out]
    outs = [np.asarray(o, dtype=np.float64) for o in outs]
    ref = model(inputs if len(inputs) > 1 else inputs[0], training=False)
    refs = ref if isinstance(ref, (list, tuple)) else [ref]
    for o, r in zip(outs, refs):
        diff = np.max(np.abs(o - np.asarray(r, dtype=np.float64)) / (1e-3 + np.abs(o)))
        if diff > 1e-3:
            raise RuntimeError(f"float64 copy differs from the float32 model by {diff}")
    return outs


def keras_line(line):
    if line == 2:
        import tf_keras as k
    else:
        import keras as k
    return k


# ----------------------------------------------------------------------------- Keras 2 cases
# Builders take (k, rng) and return (model, inputs). B=3 sequences, small sizes.


@case("Keras2LstmLastOutput", 2)
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(7, input_shape=(6, 4)), k.layers.Dense(3)])
    return m, [seq_input(rng, 3, 6, 4)]


@case("Keras2LstmReturnSequencesTimeDistributedSoftmax", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.LSTM(6, return_sequences=True, input_shape=(5, 3)),
        k.layers.TimeDistributed(k.layers.Dense(4, activation="softmax")),
    ])
    return m, [seq_input(rng, 3, 5, 3)]


@case("Keras2StackedLstm", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.LSTM(6, return_sequences=True, input_shape=(7, 3)),
        k.layers.LSTM(5, return_sequences=True),
        k.layers.LSTM(4),
        k.layers.Dense(2, activation="tanh"),
    ])
    return m, [seq_input(rng, 3, 7, 3)]


@case("Keras2GruResetAfterTrue", 2)
def _(k, rng):
    m = k.Sequential([k.layers.GRU(6, reset_after=True, return_sequences=True,
                                   input_shape=(5, 4))])
    return m, [seq_input(rng, 3, 5, 4)]


@case("Keras2GruResetAfterFalse", 2)
def _(k, rng):
    m = k.Sequential([k.layers.GRU(6, reset_after=False, return_sequences=True,
                                   input_shape=(5, 4))])
    return m, [seq_input(rng, 3, 5, 4)]


@case("Keras2SimpleRnnRelu", 2)
def _(k, rng):
    m = k.Sequential([k.layers.SimpleRNN(5, activation="relu", return_sequences=True,
                                         input_shape=(6, 3)),
                      k.layers.SimpleRNN(4)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras2LstmHardSigmoid", 2)
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(6, recurrent_activation="hard_sigmoid",
                                    return_sequences=True, input_shape=(6, 3))])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras2GruHardSigmoidResetAfterFalse", 2)
def _(k, rng):
    m = k.Sequential([k.layers.GRU(5, recurrent_activation="hard_sigmoid", reset_after=False,
                                   input_shape=(6, 3))])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras2LstmGoBackwardsSequences", 2)
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, go_backwards=True, return_sequences=True,
                                    input_shape=(6, 3))])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras2GruGoBackwardsLast", 2)
def _(k, rng):
    m = k.Sequential([k.layers.GRU(5, go_backwards=True, input_shape=(6, 3)),
                      k.layers.Dense(2)])
    return m, [seq_input(rng, 3, 6, 3)]


def bidirectional(k, rng, cell, merge, seq=True):
    inp = k.Input((6, 3))
    layer = k.layers.Bidirectional(cell(5, return_sequences=seq), merge_mode=merge)
    out = layer(inp)
    m = k.Model(inp, out)
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras2BidirectionalLstmConcat", 2)
def _(k, rng):
    return bidirectional(k, rng, k.layers.LSTM, "concat")


@case("Keras2BidirectionalGruSum", 2)
def _(k, rng):
    return bidirectional(k, rng, k.layers.GRU, "sum")


@case("Keras2BidirectionalLstmMul", 2)
def _(k, rng):
    return bidirectional(k, rng, k.layers.LSTM, "mul", seq=False)


@case("Keras2BidirectionalSimpleRnnAve", 2)
def _(k, rng):
    return bidirectional(k, rng, k.layers.SimpleRNN, "ave")


@case("Keras2BidirectionalLstmMergeNone", 2)
def _(k, rng):
    return bidirectional(k, rng, k.layers.LSTM, None)


@case("Keras2LstmReturnState", 2)
def _(k, rng):
    inp = k.Input((5, 3))
    seq, h, c = k.layers.LSTM(4, return_sequences=True, return_state=True)(inp)
    return k.Model(inp, [seq, h, c]), [seq_input(rng, 3, 5, 3)]


@case("Keras2GruReturnStateLast", 2)
def _(k, rng):
    inp = k.Input((5, 3))
    out, h = k.layers.GRU(4, return_state=True)(inp)
    return k.Model(inp, [out, h]), [seq_input(rng, 3, 5, 3)]


@case("Keras2MaskingMixedLengths", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.Masking(0.0, input_shape=(7, 3)),
        k.layers.LSTM(5, return_sequences=True),
        k.layers.GRU(4),
        k.layers.Dense(2),
    ])
    return m, [seq_input(rng, 4, 7, 3, lengths=[7, 4, 1, 6])]


@case("Keras2MaskingReturnSequencesRepeatsLastOutput", 2)
def _(k, rng):
    m = k.Sequential([k.layers.Masking(0.0, input_shape=(6, 3)),
                      k.layers.GRU(4, return_sequences=True)])
    return m, [seq_input(rng, 3, 6, 3, lengths=[6, 3, 2])]


@case("Keras2BidirectionalMaskedMixedLengths", 2)
def _(k, rng):
    m = k.Sequential([k.layers.Masking(0.0, input_shape=(6, 3)),
                      k.layers.Bidirectional(k.layers.LSTM(4, return_sequences=True)),
                      k.layers.Bidirectional(k.layers.GRU(3), merge_mode="sum")])
    return m, [seq_input(rng, 3, 6, 3, lengths=[6, 2, 4])]


@case("Keras2EmbeddingMaskZero", 2)
def _(k, rng):
    m = k.Sequential([k.layers.Embedding(11, 4, mask_zero=True, input_length=6),
                      k.layers.LSTM(5), k.layers.Dense(3, activation="softmax")])
    return m, [token_input(rng, 3, 6, 11, lengths=[6, 3, 5])]


@case("Keras2IdentityLayersAndActivations", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.LSTM(6, return_sequences=True, input_shape=(5, 3)),
        k.layers.Dropout(0.3), k.layers.SpatialDropout1D(0.2), k.layers.GaussianNoise(0.5),
        k.layers.Activation("relu"),
        k.layers.Dense(4), k.layers.Softmax(),
    ])
    return m, [seq_input(rng, 3, 5, 3)]


@case("Keras2BatchNormLayerNorm", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.BatchNormalization(input_shape=(5, 4)),
        k.layers.LSTM(6, return_sequences=True),
        k.layers.LayerNormalization(),
        k.layers.GRU(3),
    ])
    return m, [seq_input(rng, 3, 5, 4)]


@case("Keras2Conv1DPooling", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.Conv1D(5, 3, padding="same", activation="relu", input_shape=(12, 3)),
        k.layers.MaxPooling1D(2),
        k.layers.Conv1D(4, 2, padding="causal", dilation_rate=2),
        k.layers.AveragePooling1D(2, strides=1, padding="same"),
        k.layers.Conv1D(4, 2, strides=2),
        k.layers.LSTM(4),
    ])
    return m, [seq_input(rng, 3, 12, 3)]


@case("Keras2GlobalPoolingConcatenate", 2)
def _(k, rng):
    inp = k.Input((6, 3))
    seq = k.layers.LSTM(5, return_sequences=True)(inp)
    a = k.layers.GlobalMaxPooling1D()(seq)
    b = k.layers.GlobalAveragePooling1D()(seq)
    out = k.layers.Dense(2)(k.layers.Concatenate()([a, b]))
    return k.Model(inp, out), [seq_input(rng, 3, 6, 3)]


@case("Keras2FlattenReshapeRepeatVector", 2)
def _(k, rng):
    m = k.Sequential([
        k.layers.LSTM(4, return_sequences=True, input_shape=(5, 3)),
        k.layers.Flatten(),
        k.layers.Dense(6, activation="tanh"),
        k.layers.RepeatVector(3),
        k.layers.GRU(4, return_sequences=True),
        k.layers.Reshape((6, 2)),
    ])
    return m, [seq_input(rng, 3, 5, 3)]


@case("Keras2FunctionalTwoInputsAddMultiply", 2)
def _(k, rng):
    a_in = k.Input((5, 3), name="left")
    b_in = k.Input((4, 2), name="right")
    a = k.layers.LSTM(6)(a_in)
    b = k.layers.GRU(6)(b_in)
    s = k.layers.Add()([a, b])
    p = k.layers.Multiply()([a, b])
    out = k.layers.Dense(3)(k.layers.Concatenate()([s, p]))
    return k.Model([a_in, b_in], out), [seq_input(rng, 3, 5, 3), seq_input(rng, 3, 4, 2)]


@case("Keras2LstmNoBias", 2)
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, use_bias=False, return_sequences=True, input_shape=(4, 3)),
                      k.layers.Dense(2, use_bias=False)])
    return m, [seq_input(rng, 3, 4, 3)]


@case("Keras2CuDNNLstmConvertedLikeKeras", 2, cudnn="lstm")
def _(k, rng):
    from tf_keras.src.layers import CuDNNLSTM
    m = k.Sequential([CuDNNLSTM(5, return_sequences=True, input_shape=(6, 3)), k.layers.Dense(2)])
    ref = k.Sequential([k.layers.LSTM(5, recurrent_activation="sigmoid", return_sequences=True,
                                      input_shape=(6, 3)), k.layers.Dense(2)])
    return (m, ref), [seq_input(rng, 3, 6, 3)]


@case("Keras2CuDNNGruConvertedLikeKeras", 2, cudnn="gru")
def _(k, rng):
    from tf_keras.src.layers import CuDNNGRU
    m = k.Sequential([CuDNNGRU(5, input_shape=(6, 3)), k.layers.Dense(2)])
    ref = k.Sequential([k.layers.GRU(5, recurrent_activation="sigmoid", reset_after=True,
                                     input_shape=(6, 3)), k.layers.Dense(2)])
    return (m, ref), [seq_input(rng, 3, 6, 3)]


@case("Keras2CuDNNWeightsInLstmArchitecture", 2, cudnn="lstm", weights_only=True)
def _(k, rng):
    # textgenrnn's way: save_weights of a CuDNNLSTM model, loaded into its CPU architecture.
    # Layer names as textgenrnn gives them, the same in both models.
    from tf_keras.src.layers import CuDNNLSTM
    m = k.Sequential([CuDNNLSTM(5, return_sequences=True, input_shape=(6, 3), name="rnn_1"),
                      k.layers.Bidirectional(CuDNNLSTM(4), name="rnn_2"),
                      k.layers.Dense(2, name="output")])
    ref = k.Sequential([k.layers.LSTM(5, return_sequences=True, input_shape=(6, 3), name="rnn_1"),
                        k.layers.Bidirectional(k.layers.LSTM(4), name="rnn_2"),
                        k.layers.Dense(2, name="output")])
    return (m, ref), [seq_input(rng, 3, 6, 3)]


@case("Keras2CuDNNWeightsInGruArchitecture", 2, cudnn="gru", weights_only=True)
def _(k, rng):
    from tf_keras.src.layers import CuDNNGRU
    m = k.Sequential([CuDNNGRU(5, input_shape=(6, 3), name="rnn_1"),
                      k.layers.Dense(2, name="output")])
    ref = k.Sequential([k.layers.GRU(5, reset_after=True, input_shape=(6, 3), name="rnn_1"),
                        k.layers.Dense(2, name="output")])
    return (m, ref), [seq_input(rng, 3, 6, 3)]


@case("Keras2ConfigAsBareJsonList", 2, legacy_list=True)
def _(k, rng):
    m = k.Sequential([k.layers.GRU(5, reset_after=False, recurrent_activation="hard_sigmoid",
                                   input_shape=(5, 3)),
                      k.layers.Dense(2, activation="sigmoid")])
    return m, [seq_input(rng, 3, 5, 3)]


@case("Keras2WeightsOnlyWithArchitectureJson", 2, weights_only=True)
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, return_sequences=True, input_shape=(5, 3)),
                      k.layers.TimeDistributed(k.layers.Dense(2))])
    return m, [seq_input(rng, 3, 5, 3)]


# ----------------------------------------------------------------------------- Keras 3 cases


@case("Keras3LstmHardSigmoid", 3)
def _(k, rng):
    m = k.Sequential([k.Input((6, 3)),
                      k.layers.LSTM(5, recurrent_activation="hard_sigmoid", return_sequences=True),
                      k.layers.Dense(2)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras3GruResetAfterFalse", 3)
def _(k, rng):
    m = k.Sequential([k.Input((6, 3)), k.layers.GRU(5, reset_after=False, return_sequences=True)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras3GruResetAfterTrueHardSigmoid", 3)
def _(k, rng):
    m = k.Sequential([k.Input((6, 3)), k.layers.GRU(5, recurrent_activation="hard_sigmoid")])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras3StackedBidirectionalTimeDistributed", 3)
def _(k, rng):
    m = k.Sequential([
        k.Input((6, 3)),
        k.layers.Bidirectional(k.layers.LSTM(4, return_sequences=True)),
        k.layers.Dropout(0.2),
        k.layers.Bidirectional(k.layers.GRU(3, return_sequences=True), merge_mode="ave"),
        k.layers.TimeDistributed(k.layers.Dense(2, activation="sigmoid")),
    ])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras3BidirectionalMergeNoneReturnState", 3)
def _(k, rng):
    inp = k.Input((5, 3))
    outs = k.layers.Bidirectional(k.layers.LSTM(4, return_sequences=True, return_state=True),
                                  merge_mode=None)(inp)
    return k.Model(inp, list(outs)), [seq_input(rng, 3, 5, 3)]


@case("Keras3SimpleRnnGoBackwards", 3)
def _(k, rng):
    m = k.Sequential([k.Input((6, 3)),
                      k.layers.SimpleRNN(5, go_backwards=True, return_sequences=True),
                      k.layers.LSTM(3, go_backwards=True)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("Keras3MaskingMixedLengths", 3)
def _(k, rng):
    m = k.Sequential([k.Input((7, 3)), k.layers.Masking(0.0),
                      k.layers.LSTM(5, return_sequences=True), k.layers.GRU(4),
                      k.layers.Dense(2)])
    return m, [seq_input(rng, 4, 7, 3, lengths=[7, 4, 1, 6])]


@case("Keras3EmbeddingMaskZeroBidirectional", 3)
def _(k, rng):
    m = k.Sequential([k.Input((6,), dtype="int32"), k.layers.Embedding(13, 4, mask_zero=True),
                      k.layers.Bidirectional(k.layers.GRU(3)), k.layers.Dense(2)])
    return m, [token_input(rng, 3, 6, 13, lengths=[6, 2, 4])]


@case("Keras3NormalizationConvPooling", 3)
def _(k, rng):
    m = k.Sequential([
        k.Input((10, 3)),
        k.layers.Conv1D(4, 3, padding="same", activation="relu"),
        k.layers.BatchNormalization(),
        k.layers.MaxPooling1D(2),
        k.layers.LSTM(5, return_sequences=True),
        k.layers.LayerNormalization(),
        k.layers.GlobalAveragePooling1D(),
        k.layers.Dense(2, activation="softmax"),
    ])
    return m, [seq_input(rng, 3, 10, 3)]


@case("Keras3FunctionalMerges", 3)
def _(k, rng):
    a_in = k.Input((5, 3), name="a")
    b_in = k.Input((5, 3), name="b")
    a = k.layers.LSTM(4, return_sequences=True)(a_in)
    b = k.layers.GRU(4, return_sequences=True)(b_in)
    x = k.layers.Concatenate(axis=-1)([k.layers.Add()([a, b]), k.layers.Multiply()([a, b])])
    x = k.layers.SimpleRNN(3)(x)
    out = k.layers.Dense(2)(x)
    return k.Model([a_in, b_in], out), [seq_input(rng, 3, 5, 3), seq_input(rng, 3, 5, 3)]


@case("Keras3FlattenRepeatVectorReshape", 3)
def _(k, rng):
    m = k.Sequential([
        k.Input((4, 3)),
        k.layers.GRU(3, return_sequences=True),
        k.layers.Flatten(),
        k.layers.RepeatVector(2),
        k.layers.LSTM(4, return_sequences=True),
        k.layers.Reshape((4, 2)),
        k.layers.Softmax(),
    ])
    return m, [seq_input(rng, 3, 4, 3)]


@case("Keras3WeightsOnlyWithArchitectureJson", 3, weights_only=True)
def _(k, rng):
    m = k.Sequential([k.Input((5, 3)), k.layers.LSTM(4, return_sequences=True),
                      k.layers.Bidirectional(k.layers.SimpleRNN(3)), k.layers.Dense(2)])
    return m, [seq_input(rng, 3, 5, 3)]


# Two GRU reset_after=False layers of 128 units, one on the other (the Keras 2 default before TF
# 2), over 8 masked sequences of mixed lengths up to 24 steps: the GPU engine's stacked
# persistent kernel takes the pair in one launch (past its ring of 8 steps a layer may run
# ahead). Weights of PyTorch's initial scale (about 1/sqrt(128)), where the recurrence is not
# saturated.
@case("Keras2StackedGruResetAfterFalseMasked", 2, scale=0.12)
def _(k, rng):
    m = k.Sequential([
        k.layers.Masking(0.0, input_shape=(24, 16)),
        k.layers.GRU(128, reset_after=False, return_sequences=True),
        k.layers.GRU(128, reset_after=False, return_sequences=True),
    ])
    return m, [seq_input(rng, 8, 24, 16, lengths=[24, 9, 1, 17, 24, 5, 12, 20])]


# Masks in functional models. Keras 3 writes a Masking or Embedding(mask_zero) layer's mask as
# op layers (NotEqual, Any; LogicalOr, ExpandDims, ZerosLike and Concatenate for a merge's)
# passed to the next layers' `mask` argument; tf-keras leaves it implicit. The same graphs in
# both lines, with padded steps.


def padded(rng, b, t, f, lengths, value):
    x = seq_input(rng, b, t, f)
    for i, n in enumerate(lengths):
        x[i, n:, :] = value
    return x


def functional_masking_lstm(k, rng):
    inp = k.Input((7, 3))
    x = k.layers.Masking(0.0)(inp)
    x = k.layers.LSTM(5, return_sequences=True)(x)
    x = k.layers.GRU(4)(x)
    out = k.layers.Dense(2)(x)
    return k.Model(inp, out), [seq_input(rng, 4, 7, 3, lengths=[7, 4, 1, 6])]


def functional_embedding_lstm(k, rng):
    inp = k.Input((6,), dtype="int32")
    x = k.layers.Embedding(11, 4, mask_zero=True)(inp)
    x = k.layers.LSTM(5, return_sequences=True)(x)
    out = k.layers.TimeDistributed(k.layers.Dense(2))(x)
    return k.Model(inp, out), [token_input(rng, 3, 6, 11, lengths=[6, 3, 5])]


def functional_masking_bidirectional(k, rng):
    # A mask value other than 0, so that the padding is not zeros.
    inp = k.Input((6, 3))
    x = k.layers.Masking(-1.0)(inp)
    x = k.layers.Bidirectional(k.layers.LSTM(4, return_sequences=True))(x)
    out = k.layers.Bidirectional(k.layers.GRU(3), merge_mode="sum")(x)
    return k.Model(inp, out), [padded(rng, 3, 6, 3, [6, 2, 4], -1.0)]


def functional_masking_two_branches(k, rng):
    inp = k.Input((6, 3))
    x = k.layers.Masking(0.0)(inp)
    a = k.layers.LSTM(4, return_sequences=True)(x)
    b = k.layers.GRU(4, return_sequences=True)(x)
    added = k.layers.LSTM(3)(k.layers.Add()([a, b]))
    joined = k.layers.GRU(3)(k.layers.Concatenate()([a, b]))
    return k.Model(inp, [added, joined]), [seq_input(rng, 3, 6, 3, lengths=[6, 1, 4])]


@case("Keras3FunctionalMaskingLstm", 3)
def _(k, rng):
    return functional_masking_lstm(k, rng)


@case("Keras3FunctionalEmbeddingMaskZeroLstm", 3)
def _(k, rng):
    return functional_embedding_lstm(k, rng)


@case("Keras3FunctionalMaskingBidirectionalLstm", 3)
def _(k, rng):
    return functional_masking_bidirectional(k, rng)


@case("Keras3FunctionalMaskingTwoBranches", 3)
def _(k, rng):
    return functional_masking_two_branches(k, rng)


@case("Keras3FunctionalExplicitMaskArgument", 3)
def _(k, rng):
    # mask= a keras.ops expression of the layer's own input: what Masking(-1.0) computes.
    inp = k.Input((6, 3))
    mask = k.ops.any(k.ops.not_equal(inp, -1.0), axis=-1)
    x = k.layers.LSTM(4, return_sequences=True)(inp, mask=mask)
    out = k.layers.GRU(3)(x)
    return k.Model(inp, out), [padded(rng, 3, 6, 3, [6, 3, 5], -1.0)]


@case("Keras2FunctionalMaskingLstm", 2)
def _(k, rng):
    return functional_masking_lstm(k, rng)


@case("Keras2FunctionalEmbeddingMaskZeroLstm", 2)
def _(k, rng):
    return functional_embedding_lstm(k, rng)


@case("Keras2FunctionalMaskingBidirectionalLstm", 2)
def _(k, rng):
    return functional_masking_bidirectional(k, rng)


@case("Keras2FunctionalMaskingTwoBranches", 2)
def _(k, rng):
    return functional_masking_two_branches(k, rng)


@case("Keras3FunctionalMaskingThroughDenseLayerNorm", 3)
def _(k, rng):
    # The mask passes through per-step layers to the recurrent layer.
    inp = k.Input((6, 3))
    x = k.layers.Masking(0.5)(inp)
    x = k.layers.Dense(5, activation="tanh")(x)
    x = k.layers.LayerNormalization()(x)
    x = k.layers.LSTM(4, return_sequences=True)(x)
    out = k.layers.GlobalAveragePooling1D()(x)
    return k.Model(inp, out), [padded(rng, 3, 6, 3, [6, 2, 5], 0.5)]


# Masks that are not the mask of a Masking or Embedding layer: the file must be refused, naming
# the layer and the op. Saved as .keras only; tests/conformance/keras_conformance_test.cc checks
# the message holds `refused`.
REFUSED = {}


def refused(name, message):
    def wrap(fn):
        REFUSED[name] = dict(build=fn, message=message)
        return fn

    return wrap


@refused("Keras3MaskFromGreater", "(Greater) is not one of the mask ops")
def _(k):
    inp = k.Input((6, 3))
    mask = k.ops.any(k.ops.greater(inp, 0.0), axis=-1)
    return k.Model(inp, k.layers.LSTM(4)(inp, mask=mask))


@refused("Keras3MaskOfOtherTensor", "but its input 'dense' carries no mask")
def _(k):
    inp = k.Input((6, 3))
    mask = k.ops.any(k.ops.not_equal(inp, 0.0), axis=-1)
    x = k.layers.Dense(5, name="dense")(inp)
    return k.Model(inp, k.layers.LSTM(4)(x, mask=mask))


@refused("Keras3MaskOtherValueThanMasking", "Masking(mask_value=1) of 'input_layer', but its "
         "input 'masking' carries the mask of Masking(mask_value=0)")
def _(k):
    inp = k.Input((6, 3), name="input_layer")
    x = k.layers.Masking(0.0, name="masking")(inp)
    mask = k.ops.any(k.ops.not_equal(inp, 1.0), axis=-1)
    return k.Model(inp, k.layers.LSTM(4)(x, mask=mask))


@refused("Keras3InitialStateFromGraph", "initial states wired in the graph are not supported")
def _(k):
    inp = k.Input((6, 3))
    h = k.Input((4,))
    c = k.Input((4,))
    return k.Model([inp, h, c], k.layers.LSTM(4)(inp, initial_state=[h, c]))


@refused("Keras3MergeOfDifferentMasks", "is the OR of 2 different masks")
def _(k):
    a_in = k.Input((6, 3))
    b_in = k.Input((6, 3))
    a = k.layers.LSTM(4, return_sequences=True)(k.layers.Masking(0.0)(a_in))
    b = k.layers.LSTM(4, return_sequences=True)(k.layers.Masking(0.0)(b_in))
    return k.Model([a_in, b_in], k.layers.GRU(3)(k.layers.Add()([a, b])))


def make_refused(name, spec):
    import keras as k
    d = OUT / "refused" / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    model = spec["build"](k)
    randomize(model, np.random.default_rng(7))
    model.save(d / "model.keras")
    return {"keras": k.__version__, "file": "model.keras", "message": spec["message"]}


# ----------------------------------------------------------------------------- writing


def save_npy(path, a):
    np.save(path, np.ascontiguousarray(a))


def make_case(name, spec, seed):
    k = keras_line(spec["line"])
    rng = np.random.default_rng(seed)
    if spec["line"] == 2:
        k.backend.clear_session()
    built, inputs = spec["build"](k, rng)
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    files = []
    if spec.get("cudnn"):
        model, ref = built
        model.build((None,) + tuple(inputs[0].shape[1:]))
        randomize(model, rng, spec.get("scale", 0.7))
        if spec.get("weights_only"):
            # CuDNN weights under the plain architecture: the pair a textgenrnn user holds.
            model.save_weights(d / "weights.h5", save_format="h5")
            (d / "architecture.json").write_text(ref.to_json())
            ref.load_weights(d / "weights.h5")
            files.append({"file": "weights.h5", "architecture": "architecture.json"})
        else:
            model.save(d / "model.h5", save_format="h5")
            ref.load_weights(d / "model.h5")
            files.append({"file": "model.h5"})
        # Keras's own CuDNN -> plain conversion, as load_weights applies it.
        outs = predict64(k, ref, inputs)
    else:
        model = built
        randomize(model, rng, spec.get("scale", 0.7))
        outs = predict64(k, model, inputs)
        if spec["line"] == 2:
            if spec.get("weights_only"):
                model.save_weights(d / "weights.h5", save_format="h5")
                (d / "architecture.json").write_text(model.to_json())
                files.append({"file": "weights.h5", "architecture": "architecture.json"})
            else:
                model.save(d / "model.h5", save_format="h5")
                if spec.get("legacy_list"):
                    # The form Keras <= 2.2.2 wrote: Sequential's config as a bare layer list.
                    with h5py.File(d / "model.h5", "r+") as f:
                        cfg = json.loads(f.attrs["model_config"])
                        cfg["config"] = cfg["config"]["layers"]
                        f.attrs["model_config"] = json.dumps(cfg).encode()
                        f.attrs["keras_version"] = b"2.2.2"
                files.append({"file": "model.h5"})
        elif spec.get("weights_only"):
            model.save_weights(d / "model.weights.h5")
            (d / "architecture.json").write_text(model.to_json())
            files.append({"file": "model.weights.h5", "architecture": "architecture.json"})
        else:
            model.save(d / "model.keras")
            model.save(d / "model.h5")
            files += [{"file": "model.keras"}, {"file": "model.h5"}]
    in_names, out_names = [], []
    for i, x in enumerate(inputs):
        save_npy(d / f"input_{i}.npy", x)
        in_names.append(f"input_{i}.npy")
    for i, y in enumerate(outs):
        save_npy(d / f"expected_{i}.npy", y)
        out_names.append(f"expected_{i}.npy")
    return {"keras": k.__version__, "files": files, "inputs": in_names, "outputs": out_names}


REAL = {
    "aind_nlp_gru_timedistributed": dict(file="aind_nlp_gru_timedistributed.h5", line=2, batch=3),
    "arabic_sentiment_lstm": dict(file="arabic_sentiment_lstm.h5", line=2, batch=3),
    "elec_gru3_reset_after": dict(file="elec_gru3_reset_after.h5", line=2, batch=2),
    "k3_sensor_bilstm": dict(file="k3_sensor_bilstm.h5", line=3, batch=3),
    "k3_weather_lstm2": dict(file="k3_weather_lstm2.keras", line=3, batch=3),
}


def patch_old_defaults(obj):
    """GRU configs written before Keras 2.3 have no reset_after key and mean False; tf-keras
    would read the missing key as its own default (True)."""
    if isinstance(obj, dict):
        if obj.get("class_name") in ("GRU", "CuDNNGRU") and isinstance(obj.get("config"), dict):
            obj["config"].setdefault("reset_after", False)
        for v in obj.values():
            patch_old_defaults(v)
    elif isinstance(obj, list):
        for v in obj:
            patch_old_defaults(v)
    return obj


def load_real(k, line, path):
    if line == 3:
        return k.models.load_model(path, compile=False)
    with h5py.File(path, "r") as f:
        raw = f.attrs["model_config"]
    cfg = patch_old_defaults(json.loads(raw.decode() if isinstance(raw, bytes) else raw))
    if isinstance(cfg.get("config"), list):  # Keras <= 2.2.2: Sequential as a bare list
        cfg["config"] = {"name": "sequential", "layers": cfg["config"]}
    model = k.models.model_from_json(json.dumps(cfg))
    model.load_weights(path)
    return model


def make_real(stem, spec, seed):
    k = keras_line(spec["line"])
    model = load_real(k, spec["line"], REAL_DIR / spec["file"])
    shape = [spec["batch"]] + [int(s) for s in model.inputs[0].shape[1:]]
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, size=shape).astype(np.float32)
    outs = predict64(k, model, [x])
    d = OUT / "real" / stem
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    save_npy(d / "input_0.npy", x)
    for i, y in enumerate(outs):
        save_npy(d / f"expected_{i}.npy", y)
    return {"keras": k.__version__, "files": [{"file": spec["file"]}], "inputs": ["input_0.npy"],
            "outputs": [f"expected_{i}.npy" for i in range(len(outs))]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    manifest_path = OUT / "cases.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("cases", {})
    manifest.setdefault("real", {})
    for i, (name, spec) in enumerate(CASES.items()):
        if args.only and name not in args.only:
            continue
        print("case", name, file=sys.stderr)
        manifest["cases"][name] = make_case(name, spec, 1000 + i)
    manifest.setdefault("refused", {})
    for name, spec in REFUSED.items():
        if args.only and name not in args.only:
            continue
        print("refused", name, file=sys.stderr)
        manifest["refused"][name] = make_refused(name, spec)
    if REAL_DIR.is_dir():
        for i, (stem, spec) in enumerate(REAL.items()):
            if args.only and stem not in args.only:
                continue
            print("real", stem, file=sys.stderr)
            manifest["real"][stem] = make_real(stem, spec, 2000 + i)
    else:
        print(f"{REAL_DIR} is absent: real-file fixtures left as they are", file=sys.stderr)
    manifest["cases"] = {n: manifest["cases"][n] for n in CASES if n in manifest["cases"]}
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
