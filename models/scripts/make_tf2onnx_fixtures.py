#!/usr/bin/env python3
"""Keras models that rnnserve serves through ONNX: made by real Keras, converted by real tf2onnx.

A Keras model with a custom layer cannot load as a Keras file (rnnserve has no code for the
layer's Python `call`). tf2onnx traces the layer into ONNX ops, and rnnserve serves the .onnx
file. Each case is a folder tests/fixtures/onnx/tf2onnx/<Case>/ with model.onnx (tf2onnx's
output) and data.npz (in_<k>: the inputs; out_<k>: Keras's predictions, computed in float64 by
a float64 copy of the model holding the same float32 weights), the layout of
make_onnx_fixtures.py's families. tests/conformance/onnx_fixtures_test.cc runs them on the CPU
engine (Tf2OnnxTest) and tests/gpu/gpu_conformance_test.cc on the GPU engine.

  TextgenrnnAttentionTwoLstms  textgenrnn's architecture: float token ids -> Embedding -> two
                               stacked LSTMs -> concatenate(embedding, lstm_1, lstm_2) ->
                               the custom AttentionWeightedAverage layer -> Dense(softmax).

Needs (PyPI): tensorflow-cpu 2.x, tf-keras, tf2onnx 1.17, onnx, onnxruntime, numpy, h5py.
Run:   python3 models/scripts/make_tf2onnx_fixtures.py
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
import tf_keras as k  # noqa: E402
from tf_keras import backend as K  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_keras_fixtures import predict64, randomize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "onnx" / "tf2onnx"


class AttentionWeightedAverage(k.layers.Layer):
    """textgenrnn's attention layer (textgenrnn/AttentionWeightedAverage.py), as users copy it:
    a learned [F, 1] projection scores each step; the output is the softmax-weighted average of
    the steps."""

    def __init__(self, return_attention=False, **kwargs):
        self.init = k.initializers.get("uniform")
        self.supports_masking = True
        self.return_attention = return_attention
        super().__init__(**kwargs)

    def build(self, input_shape):
        self.input_spec = [k.layers.InputSpec(ndim=3)]
        assert len(input_shape) == 3
        self.W = self.add_weight(shape=(input_shape[2], 1), name="{}_W".format(self.name),
                                 initializer=self.init)
        super().build(input_shape)

    def call(self, x, mask=None):
        logits = K.dot(x, self.W)
        x_shape = K.shape(x)
        logits = K.reshape(logits, (x_shape[0], x_shape[1]))
        ai = K.exp(logits - K.max(logits, axis=-1, keepdims=True))
        if mask is not None:
            ai = ai * K.cast(mask, K.floatx())
        att_weights = ai / (K.sum(ai, axis=1, keepdims=True) + K.epsilon())
        weighted_input = x * K.expand_dims(att_weights)
        result = K.sum(weighted_input, axis=1)
        if self.return_attention:
            return [result, att_weights]
        return result

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])

    def compute_mask(self, inputs, input_mask=None):
        return None

    def get_config(self):
        cfg = super().get_config()
        cfg["return_attention"] = self.return_attention
        return cfg


def textgenrnn_model(max_length=8, vocab=20, dim=6, units=5):
    inp = k.Input(shape=(max_length,), name="input")  # float32, as textgenrnn declares it
    embedded = k.layers.Embedding(vocab, dim, input_length=max_length, name="embedding")(inp)
    rnn_1 = k.layers.LSTM(units, return_sequences=True, name="rnn_1")(embedded)
    rnn_2 = k.layers.LSTM(units, return_sequences=True, name="rnn_2")(rnn_1)
    seq = k.layers.concatenate([embedded, rnn_1, rnn_2], name="rnn_concat")
    att = AttentionWeightedAverage(name="attention")(seq)
    out = k.layers.Dense(vocab, activation="softmax", name="output")(att)
    return k.Model(inputs=[inp], outputs=[out])


def make(name, model, x, opset=13):
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    with k.utils.custom_object_scope({"AttentionWeightedAverage": AttentionWeightedAverage}):
        want = predict64(k, model, [x])
    spec = [tf.TensorSpec((None,) + tuple(x.shape[1:]), tf.float32, name="input")]
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset,
                               output_path=str(d / "model.onnx"))
    # A sanity check of the conversion only; the expected outputs are Keras's.
    sess = ort.InferenceSession(str(d / "model.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x})
    diff = float(np.max(np.abs(got[0] - want[0])))
    print(f"{name}: onnxruntime vs Keras max |diff| {diff:.2e}", file=sys.stderr)
    if diff > 1e-5:
        raise RuntimeError(f"{name}: tf2onnx's model differs from Keras by {diff}")
    np.savez(d / "data.npz", in_0=x, **{f"out_{i}": w for i, w in enumerate(want)})


def main():
    rng = np.random.default_rng(31)
    model = textgenrnn_model()
    randomize(model, rng)
    x = rng.integers(0, 20, size=(3, 8)).astype(np.float32)
    make("TextgenrnnAttentionTwoLstms", model, x)
    print("tf2onnx", tf2onnx.__version__, "tf", tf.__version__, "tf-keras", k.__version__,
          file=sys.stderr)


if __name__ == "__main__":
    main()
