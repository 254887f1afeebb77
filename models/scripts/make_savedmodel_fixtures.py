#!/usr/bin/env python3
"""Builds the SavedModel fixtures: small Keras models with random weights, saved by real Keras.

Each tf_keras (Keras 2) case is saved twice by tf_keras itself: as a SavedModel directory laid
out as TF Serving wants it (`model.save(dir)`: <Case>/model/1/saved_model.pb, keras_metadata.pb,
variables/) and as an .h5 file (<Case>/model.h5), with random inputs (input_<i>.npy) and Keras's
own predict outputs (expected_<i>.npy, float32, in Keras's output order) and the serving
signature as TensorFlow reads it (signature.json: tf.saved_model.load(...).signatures' keys,
dtypes and shapes, what TF Serving shows; input_order / output_order say which key each of
Keras's inputs and outputs is, keras_outputs the .keras file's output names). Most cases are saved with save_traces=False,
which keeps saved_model.pb small (KBs, the traced functions left out; the model then has no
serving_default signature, so signature.json is empty for those); the *DefaultSave cases use
the plain `model.save(dir)` and so carry the full graph and its signature.

Graph-only SavedModels (no keras_metadata.pb): Keras 3 `model.export(dir)` cases (Keras3Export*,
beside the same model's model.keras), tf_keras models written by `tf.saved_model.save`
(TfSavedModelSave*, beside model.h5) and tf_keras models whose weights and one serving
function are saved in a tf.Module (TfModuleSave*, small where the plain save of a
Bidirectional is MBs), loaded from the serving function's graph; the *Refused
cases hold an op rnnserve does not recognise (in the serving function, in a loop body) and check
the message naming it. The saved_model.pb of Keras3ExportLstmDense,
Keras3ExportMaskingBidirectionalGru, Keras3ExportTwoInputsTwoOutputs and
Keras3ExportCudnnGruLstmDense seed tests/fuzz/corpus/savedmodel_graph_fuzz/ (copied by hand
after regenerating).

tests/unit/savedmodel_import_test.cc and savedmodel_signature_test.cc have one test per case,
named like the case.

Needs: tensorflow-cpu 2.x with tf-keras and keras 3 (PyPI), numpy.

  /opt/fixenv/bin/python models/scripts/make_savedmodel_fixtures.py [CaseName ...]
  /opt/fixenv/bin/python models/scripts/make_savedmodel_fixtures.py --signatures [CaseName ...]
    (signature.json only, from the committed files)
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "savedmodel"

CASES = {}


def case(name, traces=False, compile=None):
    def wrap(fn):
        CASES[name] = dict(build=fn, traces=traces, compile=compile)
        return fn
    return wrap


def seq_input(rng, b, t, f, lengths=None):
    x = rng.normal(0.0, 1.0, size=(b, t, f)).astype(np.float32)
    if lengths is not None:
        for i, n in enumerate(lengths):
            x[i, n:, :] = 0.0
    return x


def randomize(model, rng, scale=0.7):
    new = []
    for w in model.weights:
        shape = tuple(w.shape)
        if "variance" in w.name:
            v = rng.uniform(0.5, 1.5, size=shape)
        else:
            v = rng.uniform(-scale, scale, size=shape)
        new.append(v.astype(np.float32))
    model.set_weights(new)


@case("SavedModelLstm")
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, input_shape=(6, 3)), k.layers.Dense(2)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("SavedModelGruResetAfterTrue")
def _(k, rng):
    m = k.Sequential([k.layers.GRU(4, reset_after=True, return_sequences=True,
                                   input_shape=(5, 3))])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelGruResetAfterFalse")
def _(k, rng):
    m = k.Sequential([k.layers.GRU(4, reset_after=False, return_sequences=True,
                                   input_shape=(5, 3))])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelSimpleRnn")
def _(k, rng):
    m = k.Sequential([k.layers.SimpleRNN(5, return_sequences=True, input_shape=(6, 3)),
                      k.layers.SimpleRNN(3)])
    return m, [seq_input(rng, 3, 6, 3)]


@case("SavedModelBidirectionalLstmConcat")
def _(k, rng):
    inp = k.Input((6, 3))
    out = k.layers.Bidirectional(k.layers.LSTM(4, return_sequences=True))(inp)
    out = k.layers.Dense(2)(out)
    return k.Model(inp, out), [seq_input(rng, 3, 6, 3)]


@case("SavedModelMaskingLstm")
def _(k, rng):
    m = k.Sequential([k.layers.Masking(0.0, input_shape=(6, 3)),
                      k.layers.LSTM(4, return_sequences=True),
                      k.layers.Dropout(0.3)])
    return m, [seq_input(rng, 3, 6, 3, lengths=[6, 4, 2])]


@case("SavedModelStackedBatchNorm")
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, return_sequences=True, input_shape=(7, 3)),
                      k.layers.GRU(4, return_sequences=True),
                      k.layers.BatchNormalization(),
                      k.layers.LSTM(3),
                      k.layers.Dense(2, activation="tanh")])
    return m, [seq_input(rng, 3, 7, 3)]


@case("SavedModelEmbeddingConvLayerNormTimeDistributed")
def _(k, rng):
    m = k.Sequential([k.layers.Embedding(20, 4, input_length=6),
                      k.layers.Conv1D(5, 3, padding="same", activation="relu"),
                      k.layers.LSTM(4, return_sequences=True),
                      k.layers.LayerNormalization(),
                      k.layers.TimeDistributed(k.layers.Dense(3, activation="softmax"))])
    return m, [rng.integers(1, 20, size=(3, 6)).astype(np.int64)]


@case("SavedModelEmbeddingMaskZeroGru")
def _(k, rng):
    m = k.Sequential([k.layers.Embedding(15, 3, mask_zero=True, input_length=5),
                      k.layers.GRU(4, return_sequences=True)])
    x = rng.integers(1, 15, size=(3, 5)).astype(np.int64)
    x[1, 3:] = 0
    x[2, 1:] = 0
    return m, [x]


# CuDNN layers (Keras 2 models trained on GPU): saved as they are; the expected outputs are
# Keras's own CuDNN -> LSTM/GRU conversion (load_weights of the CuDNN model's .h5 into the
# plain twin), predicted by tf_keras on the CPU.
@case("SavedModelCuDNNLstmBidirectionalCuDNNGru")
def _(k, rng):
    from tf_keras.src.layers import CuDNNGRU, CuDNNLSTM
    m = k.Sequential([CuDNNLSTM(5, return_sequences=True, input_shape=(6, 3)),
                      k.layers.Bidirectional(CuDNNGRU(3)),
                      k.layers.Dense(2)])
    ref = k.Sequential([k.layers.LSTM(5, recurrent_activation="sigmoid", return_sequences=True,
                                      input_shape=(6, 3)),
                        k.layers.Bidirectional(k.layers.GRU(3, recurrent_activation="sigmoid",
                                                            reset_after=True)),
                        k.layers.Dense(2)])
    return (m, ref), [seq_input(rng, 3, 6, 3)]


# Compiled: the SavedModel's keras_metadata.pb and the .h5 both hold the training config.
@case("SavedModelCompiledTrainingConfig",
      compile=dict(optimizer="adam", loss="sparse_categorical_crossentropy",
                   metrics=["accuracy"]))
def _(k, rng):
    m = k.Sequential([k.layers.GRU(4, input_shape=(5, 3)),
                      k.layers.Dense(3, activation="softmax")])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelSimpleRnnDefaultSave", traces=True)
def _(k, rng):
    m = k.Sequential([k.layers.SimpleRNN(3, input_shape=(4, 2))])
    return m, [seq_input(rng, 2, 4, 2)]


@case("SavedModelFunctionalReturnStateDefaultSave", traces=True)
def _(k, rng):
    inp = k.Input((4, 2), name="tokens")
    seq, h = k.layers.SimpleRNN(3, return_sequences=True, return_state=True, name="rnn")(inp)
    return k.Model(inp, [seq, h]), [seq_input(rng, 2, 4, 2)]


# Bidirectional merge modes other than concat (tf_keras; merge_mode=None gives the two
# directions as two outputs, so a functional model).
@case("SavedModelBidirectionalGruSum")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.GRU(3, return_sequences=True),
                                             merge_mode="sum", input_shape=(5, 3)),
                      k.layers.Dense(2)])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelBidirectionalLstmMul")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.LSTM(3), merge_mode="mul",
                                             input_shape=(5, 3))])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelBidirectionalSimpleRnnAve")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.SimpleRNN(3, return_sequences=True),
                                             merge_mode="ave", input_shape=(5, 3))])
    return m, [seq_input(rng, 3, 5, 3)]


@case("SavedModelBidirectionalGruMergeNone")
def _(k, rng):
    inp = k.Input((5, 3), name="tokens")
    fw, bw = k.layers.Bidirectional(k.layers.GRU(3, return_sequences=True), merge_mode=None,
                                    name="bigru")(inp)
    return k.Model(inp, [fw, bw]), [seq_input(rng, 3, 5, 3)]


# Several inputs and outputs, saved with their traces so the serving signature (the Keras input
# names and output layer names TF Serving shows) is there.
@case("SavedModelTwoInputsTwoOutputsDefaultSave", traces=True)
def _(k, rng):
    a = k.Input((4, 3), name="tokens")
    b = k.Input((3, 2), name="context")
    h = k.layers.Concatenate()([k.layers.SimpleRNN(3, name="rnn_a")(a),
                                k.layers.SimpleRNN(2, name="rnn_b")(b)])
    score = k.layers.Dense(2, name="score")(h)
    label = k.layers.Dense(3, activation="softmax", name="label")(h)
    return k.Model([a, b], [score, label]), [seq_input(rng, 2, 4, 3), seq_input(rng, 2, 3, 2)]


def signature_names(d, input_order=None, output_order=None, keras_outputs=None):
    """The serving_default signature as TensorFlow itself reads it (tf.saved_model.load(...)
    .signatures, what saved_model_cli shows and TF Serving serves): its input and output keys,
    each key's dtype and shape, and which key each of Keras's inputs and predict outputs is
    (input_order, output_order; input_<i>.npy and expected_<i>.npy follow Keras's order)."""
    import tensorflow as tf
    loaded = tf.saved_model.load(str(d))
    sig = loaded.signatures.get("serving_default")
    if sig is None:
        return {}
    specs = dict(sig.structured_input_signature[1])
    specs.update(sig.structured_outputs)
    out = {"inputs": sorted(sig.structured_input_signature[1].keys()),
           "outputs": sorted(sig.structured_outputs.keys()),
           "tensors": {name: {"dtype": spec.dtype.name,
                              "shape": [None if v is None else int(v)
                                        for v in spec.shape.as_list()]}
                       for name, spec in specs.items()}}
    if input_order is not None:
        out["input_order"] = list(input_order)
    if output_order is not None:
        out["output_order"] = list(output_order)
    if keras_outputs is not None:
        out["keras_outputs"] = list(keras_outputs)
    return out


def write_signature(d, input_order=None, output_order=None, keras_outputs=None):
    (d / "signature.json").write_text(json.dumps(
        signature_names(d / "model" / "1", input_order, output_order, keras_outputs),
        sort_keys=True) + "\n")


def make_case(name, spec, seed):
    import tf_keras as k
    k.backend.clear_session()
    rng = np.random.default_rng(seed)
    model, inputs = spec["build"](k, rng)
    ref = None
    if isinstance(model, tuple):
        model, ref = model
    randomize(model, rng)
    if spec["compile"]:
        model.compile(**spec["compile"])
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "model").mkdir(parents=True)
    with_optimizer = bool(spec["compile"])  # the training config is saved with it only
    model.save(str(d / "model" / "1"), save_traces=spec["traces"],
               include_optimizer=with_optimizer)
    fp = d / "model" / "1" / "fingerprint.pb"
    if fp.exists():
        fp.unlink()  # not read by anyone; keeps the fixture smaller
    model.save(str(d / "model.h5"), include_optimizer=with_optimizer)
    if ref is not None:
        ref.load_weights(str(d / "model.h5"))  # Keras's own CuDNN conversion
    outs = (ref or model).predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
    outs = outs if isinstance(outs, list) else [outs]
    for i, x in enumerate(inputs):
        np.save(d / f"input_{i}.npy", x)
    for i, y in enumerate(outs):
        np.save(d / f"expected_{i}.npy", np.asarray(y, dtype=np.float32))
    write_signature(d, model.input_names, model.output_names)


# Graph-only SavedModels (no keras_metadata.pb): Keras 3 `model.export(dir)` and
# `tf.saved_model.save` of a tf_keras model. Each is saved beside the Keras file of the same model
# (model.keras for Keras 3, model.h5 for tf_keras), with Keras's own predict outputs. The Keras 3
# cases run in a child Python, as keras 3 and tf_keras do not share one process.
KERAS3_CASES = {
    "Keras3ExportLstmDense": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.LSTM(5), L.Dense(2)])
x = seq(3, 6, 3)""",
    "Keras3ExportGruResetAfterTrue": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"), L.GRU(4, return_sequences=True),
                      L.Dense(2, activation="tanh")])
x = seq(3, 5, 3)""",
    "Keras3ExportGruResetAfterFalse": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"), L.GRU(4, reset_after=False),
                      L.Dropout(0.3), L.Dense(2)])
x = seq(3, 5, 3)""",
    "Keras3ExportSimpleRnnStacked": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.SimpleRNN(4, return_sequences=True),
                      L.SimpleRNN(3, activation="relu")])
x = seq(3, 6, 3)""",
    "Keras3ExportStackedLstmGoBackwardsGru": """
m = keras.Sequential([keras.Input((7, 3), name="tokens"),
                      L.LSTM(5, return_sequences=True, go_backwards=True),
                      L.GRU(3, return_sequences=True), L.Dense(2, activation="softmax")])
x = seq(3, 7, 3)""",
    "Keras3ExportMaskingStackedLstm": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.Masking(0.0),
                      L.LSTM(4, return_sequences=True), L.GRU(3)])
x = seq(3, 6, 3, lengths=[6, 4, 2])""",
    "Keras3ExportBidirectionalLstmDense": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"),
                      L.Bidirectional(L.LSTM(4, return_sequences=True)), L.Dense(2)])
x = seq(3, 6, 3)""",
    "Keras3ExportMaskingBidirectionalGru": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"), L.Masking(0.0),
                      L.Bidirectional(L.GRU(3))])
x = seq(3, 5, 3, lengths=[5, 3, 1])""",
    "Keras3ExportEmbeddingMaskZeroGruBatchNorm": """
m = keras.Sequential([keras.Input((6,), dtype="int32", name="ids"),
                      L.Embedding(12, 4, mask_zero=True), L.GRU(5, return_sequences=True),
                      L.BatchNormalization(), L.Dense(2)])
x = rng.integers(1, 12, size=(3, 6)).astype(np.int32)
x[1, 4:] = 0
x[2, 2:] = 0""",
    "Keras3ExportDenseActivationHead": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.LSTM(4), L.Dense(3, activation="relu"),
                      L.Activation("tanh"), L.Dense(2, activation="softmax")])
x = seq(3, 6, 3)""",
    "Keras3ExportLoopBodyOpRefused": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"),
                      L.LSTM(4, recurrent_activation="hard_sigmoid")])
x = seq(3, 6, 3)""",
    "Keras3ExportUnknownOpRefused": """
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.LSTM(4, return_sequences=True),
                      L.LayerNormalization()])
x = seq(3, 6, 3)""",
}

# Bidirectional merge modes, several inputs and outputs (appended: the seeds above stay).
KERAS3_CASES.update({
    "Keras3ExportBidirectionalGruSum": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"),
                      L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode="sum"),
                      L.Dense(2)])
x = seq(3, 5, 3)""",
    "Keras3ExportBidirectionalLstmMul": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"),
                      L.Bidirectional(L.LSTM(3), merge_mode="mul")])
x = seq(3, 5, 3)""",
    "Keras3ExportBidirectionalSimpleRnnAve": """
m = keras.Sequential([keras.Input((5, 3), name="tokens"),
                      L.Bidirectional(L.SimpleRNN(3, return_sequences=True), merge_mode="ave")])
x = seq(3, 5, 3)""",
    "Keras3ExportBidirectionalGruMergeNone": """
inp = keras.Input((5, 3), name="tokens")
fw, bw = L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode=None)(inp)
m = keras.Model(inp, [fw, bw])
x = seq(3, 5, 3)""",
    "Keras3ExportTwoInputsTwoOutputs": """
a = keras.Input((6, 3), name="tokens")
b = keras.Input((4, 2), name="context")
h = L.Concatenate()([L.LSTM(4)(a), L.GRU(3)(b)])
m = keras.Model([a, b], [L.Dense(2, name="score")(h),
                         L.Dense(3, activation="softmax", name="label")(h)])
x = [seq(3, 6, 3), seq(3, 4, 2)]""",
    # Exported as on a GPU: the layers as CudnnRNNV3 ops (cudnn_export, in KERAS3_CODE).
    "Keras3ExportCudnnLstmGru": """
cudnn_export = True
m = keras.Sequential([keras.Input((6, 3), name="tokens"), L.LSTM(5, return_sequences=True),
                      L.GRU(4)])
x = seq(3, 6, 3)""",
    "Keras3ExportCudnnGruLstmDense": """
cudnn_export = True
m = keras.Sequential([keras.Input((5, 3), name="tokens"), L.GRU(4, return_sequences=True),
                      L.LSTM(3), L.Dense(2)])
x = seq(3, 5, 3)""",
    "Keras3ExportCudnnMaskedRefused": """
cudnn_export = True
m = keras.Sequential([keras.Input((5, 3), name="tokens"), L.Masking(0.0), L.LSTM(3)])
x = seq(3, 5, 3, lengths=[5, 3, 2])""",
    "Keras3ExportTwoInputsMergeLayers": """
a = keras.Input((5, 3), name="tokens")
b = keras.Input((4, 2), name="context")
ha = L.LSTM(3)(a)
hb = L.GRU(3)(b)
h = L.Concatenate()([L.Add()([ha, hb]), L.Multiply()([ha, hb]), L.Average()([ha, hb])])
m = keras.Model([a, b], L.Dense(2)(h))
x = [seq(3, 5, 3), seq(3, 4, 2)]""",
    "Keras3ExportCudnnBidirectionalLstmGru": """
cudnn_export = True
m = keras.Sequential([keras.Input((5, 3), name="tokens"),
                      L.Bidirectional(L.LSTM(3, return_sequences=True)),
                      L.Bidirectional(L.GRU(2), merge_mode="sum"), L.Dense(2)])
x = seq(3, 5, 3)""",
    # Its model.keras writes the mask as NotEqual/Any op layers passed to the LSTM and GRU as
    # `mask`, which rnnserve's .keras reader does not take: the test compares the export with
    # Keras's predict only.
    "Keras3ExportMaskingTwoBranches": """
inp = keras.Input((6, 3), name="tokens")
masked = L.Masking(0.0)(inp)
h = L.Concatenate()([L.LSTM(3)(masked), L.GRU(2)(masked)])
m = keras.Model(inp, L.Dense(2)(h))
x = seq(3, 6, 3, lengths=[6, 4, 2])""",
})

KERAS3_CODE = r"""
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "0"
import numpy as np, keras
L = keras.layers
case_dir, seed = sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(seed)
def seq(b, t, f, lengths=None):
    x = rng.normal(0.0, 1.0, size=(b, t, f)).astype(np.float32)
    for i, n in enumerate(lengths or []):
        x[i, n:, :] = 0.0
    return x
exec(sys.stdin.read())
new = []
for w in m.weights:
    v = rng.uniform(0.5, 1.5, w.shape) if "variance" in w.path else rng.uniform(-0.7, 0.7, w.shape)
    new.append(v.astype(np.float32))
m.set_weights(new)
m.save(os.path.join(case_dir, "model.keras"))
if globals().get("cudnn_export"):
    # As on a GPU: Keras's TensorFlow backend takes its cuDNN path when it sees a GPU and a
    # CUDA build, and the export's trace then holds Keras's own CudnnRNNV3 ops and their
    # params, built from the layer's variables. Tracing needs the op registered, not its
    # kernel, so a CPU build writes the same graph. The expected outputs stay Keras's
    # predict on the CPU (below, before this changes anything, is the same model).
    import tensorflow as tf
    krnn = sys.modules["keras.src.backend.tensorflow.rnn"]
    expected = m.predict(x, verbose=0)
    krnn._is_gpu_available = lambda: True
    build_info = tf.sysconfig.get_build_info()
    tf.sysconfig.get_build_info = lambda: dict(build_info, is_cuda_build=True)
m.export(os.path.join(case_dir, "model", "1"), verbose=False)
xs = x if isinstance(x, list) else [x]
for i, xi in enumerate(xs):
    np.save(os.path.join(case_dir, f"input_{i}.npy"), xi)
ys = expected if globals().get("cudnn_export") else m.predict(x, verbose=0)
ys = ys if isinstance(ys, (list, tuple)) else [ys]
for i, y in enumerate(ys):
    np.save(os.path.join(case_dir, f"expected_{i}.npy"), np.asarray(y, np.float32))
# The export names its outputs output_<i> in the model's output order, its inputs after the
# Input layers.
json.dump(keras3_order(m), open(os.path.join(case_dir, "order.json"), "w"))
"""

# The Keras 3 model's input names, its export's output keys (output_<i>, in the model's output
# order) and the .keras file's output names (the layers', made unique as Keras 2 does: a layer
# of two outputs gives name, name_1).
KERAS3_ORDER = r"""
def keras3_order(m):
    names, seen = [], {}
    for t in m.outputs:
        base = t._keras_history[0].name
        name, n = base, 0
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return {"inputs": [t.name for t in m.inputs],
            "outputs": [f"output_{i}" for i in range(len(m.outputs))],
            "keras_outputs": names}
"""
KERAS3_CODE = KERAS3_ORDER + KERAS3_CODE

# Rewrites a Keras 3 case's signature.json from its files (--signatures).
KERAS3_ORDER_CODE = KERAS3_ORDER + r"""
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "0"
import keras
m = keras.saving.load_model(os.path.join(sys.argv[1], "model.keras"))
json.dump(keras3_order(m), open(os.path.join(sys.argv[1], "order.json"), "w"))
"""


def make_keras3_case(name, code, seed):
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "model").mkdir(parents=True)
    subprocess.run([sys.executable, "-c", KERAS3_CODE, name, str(d), str(seed)],
                   input=code.encode(), check=True)
    tidy_saved_model(d / "model" / "1")
    write_keras3_signature(d)


def write_keras3_signature(d):
    order = json.loads((d / "order.json").read_text())
    (d / "order.json").unlink()
    write_signature(d, order["inputs"], order["outputs"], order["keras_outputs"])


def refresh_signature(d):
    """signature.json again from a case's files, leaving the model files as they are."""
    if (d / "model.keras").exists():
        subprocess.run([sys.executable, "-c", KERAS3_ORDER_CODE, str(d)], check=True)
        write_keras3_signature(d)
        return
    import tf_keras as k
    from tf_keras.src.layers import CuDNNGRU, CuDNNLSTM
    model = k.models.load_model(str(d / "model.h5"), compile=False,
                                custom_objects={"CuDNNGRU": CuDNNGRU, "CuDNNLSTM": CuDNNLSTM})
    write_signature(d, model.input_names, model.output_names)


# tf.saved_model.save of tf_keras models: no keras_metadata.pb either.
TF_SAVE_CASES = {}


def tf_save_case(name):
    def wrap(fn):
        TF_SAVE_CASES[name] = fn
        return fn
    return wrap


@tf_save_case("TfSavedModelSaveLstmDense")
def _(k, rng):
    m = k.Sequential([k.layers.LSTM(5, input_shape=(6, 3)), k.layers.Dense(2)])
    return m, seq_input(rng, 3, 6, 3)


# tf_keras's GRU hands its [2, 3H] bias to the loop unstacked.
@tf_save_case("TfSavedModelSaveGruDense")
def _(k, rng):
    m = k.Sequential([k.layers.GRU(4, return_sequences=True, input_shape=(5, 3)),
                      k.layers.Dense(2, activation="tanh")])
    return m, seq_input(rng, 3, 5, 3)


# tf_keras's Masking multiplies by the mask (Mul) and hands its loops the squeezed mask.
@tf_save_case("TfSavedModelSaveMaskingSimpleRnn")
def _(k, rng):
    m = k.Sequential([k.layers.Masking(0.0, input_shape=(6, 3)),
                      k.layers.SimpleRNN(4, return_sequences=True),
                      k.layers.Dense(2)])
    return m, seq_input(rng, 3, 6, 3, lengths=[6, 4, 2])


# tf_keras models written by tf.saved_model.save of a tf.Module that holds only the model's
# weights and one serving function: the graph of that one trace (the plain save above keeps
# every traced variant of each layer, MBs for a Bidirectional). The signature's keys are the
# model's input and output names, as tf_keras's own serving signature names them.
TF_MODULE_CASES = {}


def tf_module_case(name):
    def wrap(fn):
        TF_MODULE_CASES[name] = fn
        return fn
    return wrap


@tf_module_case("TfModuleSaveBidirectionalGruAve")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.GRU(3, return_sequences=True),
                                             merge_mode="ave", input_shape=(5, 3)),
                      k.layers.Dense(2)])
    return m, seq_input(rng, 3, 5, 3)


@tf_module_case("TfModuleSaveBidirectionalLstmSum")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.LSTM(3, return_sequences=True),
                                             merge_mode="sum", input_shape=(5, 3))])
    return m, seq_input(rng, 3, 5, 3)


@tf_module_case("TfModuleSaveBidirectionalSimpleRnnMul")
def _(k, rng):
    m = k.Sequential([k.layers.Bidirectional(k.layers.SimpleRNN(3), merge_mode="mul",
                                             input_shape=(5, 3))])
    return m, seq_input(rng, 3, 5, 3)


def make_tf_module_case(name, build, seed):
    import tensorflow as tf
    import tf_keras as k
    k.backend.clear_session()
    rng = np.random.default_rng(seed)
    model, x = build(k, rng)
    randomize(model, rng)
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "model").mkdir(parents=True)
    spec = tf.TensorSpec([None] + list(x.shape[1:]), tf.float32, name=model.input_names[0])
    serve = tf.function(lambda t: {model.output_names[0]: model(t, training=False)},
                        input_signature=[spec])
    module = tf.Module()
    module.weights = list(model.weights)
    module.serve = serve
    tf.saved_model.save(module, str(d / "model" / "1"), signatures=serve)
    tidy_saved_model(d / "model" / "1")
    model.save(str(d / "model.h5"))
    np.save(d / "input_0.npy", x)
    np.save(d / "expected_0.npy", np.asarray(model.predict(x, verbose=0), dtype=np.float32))
    write_signature(d, model.input_names, model.output_names)


def make_tf_save_case(name, build, seed):
    import tensorflow as tf
    import tf_keras as k
    k.backend.clear_session()
    rng = np.random.default_rng(seed)
    model, x = build(k, rng)
    randomize(model, rng)
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "model").mkdir(parents=True)
    # tf_keras's RNN layers keep their CuDNN and gradient variants in the graph (hundreds of KB
    # of saved_model.pb per layer), so there are few such cases.
    tf.saved_model.save(model, str(d / "model" / "1"))
    tidy_saved_model(d / "model" / "1")
    model.save(str(d / "model.h5"))
    np.save(d / "input_0.npy", x)
    np.save(d / "expected_0.npy", np.asarray(model.predict(x, verbose=0), dtype=np.float32))
    write_signature(d, model.input_names, model.output_names)


def tidy_saved_model(v):
    """Drops what no reader needs (fingerprint.pb, an empty assets/), keeping fixtures small."""
    fp = v / "fingerprint.pb"
    if fp.exists():
        fp.unlink()
    assets = v / "assets"
    if assets.is_dir() and not any(assets.iterdir()):
        assets.rmdir()


def main():
    only = sys.argv[1:]
    if only and only[0] == "--signatures":
        for d in sorted(OUT.iterdir()):
            if d.is_dir() and (not only[1:] or d.name in only[1:]):
                print("signature", d.name, file=sys.stderr)
                refresh_signature(d)
        return
    for i, (name, spec) in enumerate(CASES.items()):
        if only and name not in only:
            continue
        print("case", name, file=sys.stderr)
        make_case(name, spec, 3000 + i)
    for i, (name, build) in enumerate(TF_SAVE_CASES.items()):
        if only and name not in only:
            continue
        print("case", name, file=sys.stderr)
        make_tf_save_case(name, build, 4000 + i)
    for i, (name, build) in enumerate(TF_MODULE_CASES.items()):
        if only and name not in only:
            continue
        print("case", name, file=sys.stderr)
        make_tf_module_case(name, build, 4500 + i)
    for i, (name, code) in enumerate(KERAS3_CASES.items()):
        if only and name not in only:
            continue
        print("case", name, file=sys.stderr)
        make_keras3_case(name, code, 5000 + i)


if __name__ == "__main__":
    main()
