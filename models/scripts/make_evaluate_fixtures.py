#!/usr/bin/env python3
"""Fixtures for Evaluate: small Keras models compiled with each loss and metric rnnserve
supports, and what Keras's own model.evaluate returns for them.

Each case directory tests/fixtures/evaluate/<case>/ holds:
  1/model.h5     the compiled model as model.save writes it (its training_config names the loss);
                 the folder is a model repository: each case is a model of version 1
  1/model.keras  instead, for the keras3_* cases: Keras 3's .keras file, whose config.json holds
                 compile()'s arguments as compile_config (losses and metrics as strings or as
                 serialized objects {"module", "class_name", "config"})
  x.npy, y.npy   inputs and targets; w.npy sample weights when the case uses them
  expected.json  {"loss": ..., "metrics": {...}, "loss_name": ..., "metric_names": [...]}:
                 model.evaluate(x, y, sample_weight=w, return_dict=True) from real Keras

The saturated_* and keras3_saturated_* cases have head weights so large that the softmax or
sigmoid outputs saturate (probabilities that are 0 or 1 in float32). Keras's TF backend then
gives a different loss from the clipped probabilities than from the logits: its cross-entropy
losses read the logits of an output that a softmax or sigmoid activation produced (tf-keras
backend._get_logits, keras/src/backend/tensorflow/nn.py _get_logits), and the clipped
probabilities where something stands between them (Keras 2's Dropout, TimeDistributed).

Run: pip install tensorflow-cpu tf-keras keras numpy h5py
     python3 models/scripts/make_evaluate_fixtures.py [--keras3-only | --saturated-only]
"""
import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tf_keras as keras

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/fixtures/evaluate")
rng = np.random.default_rng(11)
B, T, F = 12, 6, 3


def lstm_model(units_out, activation, seq=False, k=keras):
    inp = k.Input((T, F), name="x")
    h = k.layers.LSTM(8, return_sequences=seq, name="lstm")(inp)
    if seq:
        out = k.layers.TimeDistributed(k.layers.Dense(units_out, activation=activation),
                                       name="head")(h)
    else:
        out = k.layers.Dense(units_out, activation=activation, name="head")(h)
    model = k.Model(inp, out, name="m")
    # Random, not trained: the weights only need to be the ones Keras evaluates with.
    for w in model.weights:
        w.assign(rng.normal(0, 0.6, w.shape).astype(np.float32))
    return model


def save_case(name, model, loss, metrics, x, y, w=None, loss_name=None, file="model.h5"):
    model.compile(optimizer="adam", loss=loss, metrics=metrics)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    # Evaluate before saving: Keras resolves "accuracy" from the data's shapes on first use, and
    # the file then records the resolved function (as a user's trained model does).
    result = model.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0, return_dict=True)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    model.save(os.path.join(d, "1", file))
    np.save(os.path.join(d, "x.npy"), x.astype(np.float32))
    np.save(os.path.join(d, "y.npy"), y)
    if w is not None:
        np.save(os.path.join(d, "w.npy"), w.astype(np.float32))
    loss_value = result.pop("loss")
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump({"loss": loss_value, "metrics": result,
                   "loss_name": loss_name or (loss if isinstance(loss, str) else loss.name)},
                  f, indent=1, sort_keys=True)
    print(name, loss_value, result)


def keras3_cases():
    """Keras 3 .keras files: compile_config in config.json, in the spellings Keras 3 writes."""
    import keras as k3

    r = np.random.default_rng(13)
    x = r.normal(0, 1, (B, T, F)).astype(np.float32)
    weights = r.uniform(0.2, 2.0, B).astype(np.float32)
    target = r.normal(0, 1, (B, 2)).astype(np.float32)
    model = lambda units, act: lstm_model(units, act, k=k3)  # noqa: E731
    # Strings, as compile(loss="mean_squared_error", metrics=["mae"]) writes them.
    save_case("keras3_mse_strings", model(2, None), "mean_squared_error", ["mae"], x, target,
              loss_name="mse", file="model.keras")
    # Serialized objects: {"module": "keras.losses", "class_name": "MeanSquaredError", ...}.
    save_case("keras3_objects_weighted", model(2, None), k3.losses.MeanSquaredError(),
              [k3.metrics.MeanAbsoluteError(), k3.metrics.RootMeanSquaredError(name="rmse")],
              x, target, weights, loss_name="mse", file="model.keras")
    labels = r.integers(0, 6, B)
    save_case("keras3_sparse_logits", model(6, None),
              k3.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"], x,
              labels.astype(np.int64), loss_name="sparse_categorical_crossentropy",
              file="model.keras")
    binary = r.integers(0, 2, (B, 1)).astype(np.float32)
    save_case("keras3_binary_weighted", model(1, "sigmoid"), "binary_crossentropy",
              ["binary_accuracy"], x, binary, weights, loss_name="binary_crossentropy",
              file="model.keras")


def saturate(model, head_names, scale=12.0, seed=17):
    """Scales the kernels of the named layers so that their outputs saturate."""
    r = np.random.default_rng(seed)
    for name in head_names:
        # TimeDistributed's inner layer is not one of the model's layers.
        inner = [l.layer for l in model.layers if hasattr(l, "layer") and l.layer.name == name]
        layer = inner[0] if inner else model.get_layer(name)
        layer.kernel.assign(r.normal(0, scale, layer.kernel.shape).astype(np.float32))
    return model


def saturated_cases():
    """Saturated softmax and sigmoid heads, Keras 2 (.h5) and Keras 3 (.keras)."""
    import keras as k3

    r = np.random.default_rng(23)
    C = 7
    x = r.normal(0, 1, (B, T, F)).astype(np.float32)
    weights = r.uniform(0.2, 2.0, B).astype(np.float32)
    labels = r.integers(0, C, B)
    onehot = np.eye(C, dtype=np.float32)[labels]
    seq_labels = r.integers(0, C, (B, T))
    multi = r.integers(0, 2, (B, 3)).astype(np.float32)
    binary = r.integers(0, 2, (B, 1)).astype(np.float32)
    seq_binary = r.integers(0, 2, (B, T, 1)).astype(np.float32)

    def head_model(k, units, head, seq=False, bidirectional=False, batchnorm=False):
        """LSTM (or BiLSTM), optional BatchNorm, then head(h) -> output; kernels named "z"."""
        inp = k.Input((T, F), name="x")
        rnn = k.layers.LSTM(8, return_sequences=seq, name="lstm")
        h = k.layers.Bidirectional(rnn, name="bilstm")(inp) if bidirectional else rnn(inp)
        if batchnorm:
            h = k.layers.BatchNormalization(name="bn")(h)
        model = k.Model(inp, head(k, h, units), name="m")
        for w in model.weights:
            w.assign(rng_sat.normal(0, 0.6, w.shape).astype(np.float32))
        if batchnorm:
            bn = model.get_layer("bn")
            bn.moving_variance.assign(rng_sat.uniform(0.5, 2.0, bn.moving_variance.shape))
        return saturate(model, ["z"])

    rng_sat = np.random.default_rng(29)
    dense_act = lambda act: lambda k, h, u: k.layers.Dense(u, activation=act, name="z")(h)  # noqa
    activation_layer = lambda act: lambda k, h, u: k.layers.Activation(act, name="head")(  # noqa
        k.layers.Dense(u, name="z")(h))
    softmax_layer = lambda k, h, u: k.layers.Softmax(name="head")(  # noqa: E731
        k.layers.Dense(u, name="z")(h))
    dropout_after = lambda act: lambda k, h, u: k.layers.Dropout(0.3, name="head")(  # noqa
        k.layers.Dense(u, activation=act, name="z")(h))
    time_distributed = lambda act: lambda k, h, u: k.layers.TimeDistributed(  # noqa: E731
        k.layers.Dense(u, activation=act, name="z"), name="head")(h)

    # Keras 2 (.h5): the loss comes from the logits of a final softmax or sigmoid...
    save_case("saturated_softmax_categorical", head_model(keras, C, dense_act("softmax")),
              "categorical_crossentropy", ["accuracy"], x, onehot)
    save_case("saturated_softmax_layer_sparse_weighted", head_model(keras, C, softmax_layer),
              "sparse_categorical_crossentropy", ["accuracy"], x, labels.astype(np.int64),
              weights)
    save_case("saturated_sigmoid_binary", head_model(keras, 3, dense_act("sigmoid")),
              "binary_crossentropy", ["binary_accuracy"], x, multi)
    save_case("saturated_sigmoid_layer_binary_weighted",
              head_model(keras, 1, activation_layer("sigmoid")), "binary_crossentropy",
              ["accuracy"], x, binary, weights)
    save_case("saturated_softmax_sequence_sparse",
              head_model(keras, C, dense_act("softmax"), seq=True),
              "sparse_categorical_crossentropy", ["accuracy"], x, seq_labels.astype(np.int64))
    # ...but from the clipped probabilities when a layer stands between: Keras 2's Dropout is a
    # tf.identity at inference, and TimeDistributed reshapes the inner layer's output.
    save_case("saturated_dropout_softmax_sparse",
              head_model(keras, C, dropout_after("softmax")),
              "sparse_categorical_crossentropy", ["accuracy"], x, labels.astype(np.int64))
    save_case("saturated_timedistributed_softmax_categorical",
              head_model(keras, C, time_distributed("softmax"), seq=True),
              "categorical_crossentropy", ["accuracy"], x,
              np.eye(C, dtype=np.float32)[seq_labels])

    # Keras 3 (.keras).
    save_case("keras3_saturated_bilstm_batchnorm_categorical",
              head_model(k3, C, dense_act("softmax"), bidirectional=True, batchnorm=True),
              "categorical_crossentropy", ["accuracy"], x, onehot, file="model.keras")
    save_case("keras3_saturated_softmax_sparse_weighted",
              head_model(k3, C, activation_layer("softmax")),
              "sparse_categorical_crossentropy", ["accuracy"], x, labels.astype(np.int64),
              weights, file="model.keras")
    save_case("keras3_saturated_sigmoid_binary", head_model(k3, 1, dense_act("sigmoid")),
              "binary_crossentropy", ["binary_accuracy"], x, binary, file="model.keras")
    # Keras 3's Dropout returns its input at inference: the logits still reach the loss.
    save_case("keras3_saturated_dropout_sigmoid_binary_weighted",
              head_model(k3, 3, dropout_after("sigmoid")), "binary_crossentropy",
              ["binary_accuracy"], x, multi, weights, file="model.keras")
    # TimeDistributed: clipped probabilities, in Keras 3's binary form (log(p), no epsilon).
    # Between 1 - 1e-4 and 1, log(1 - p) hangs on the last float32 bits of the sigmoid itself,
    # where any two engines may differ by an ulp: the outputs are kept out of that band, at 1
    # (clipped) or well below it.
    for seed in range(100):
        td = head_model(k3, 1, time_distributed("sigmoid"), seq=True)
        saturate(td, ["z"], scale=400.0, seed=seed)
        p = td.predict(x, verbose=0)
        if not np.any((p > 1 - 1e-4) & (p < 1)) and np.sum(p == 1) >= 5:
            break
    else:
        raise RuntimeError("no seed keeps the sigmoid's outputs out of (1 - 1e-4, 1)")
    save_case("keras3_saturated_timedistributed_sigmoid_binary", td, "binary_crossentropy",
              ["binary_accuracy"], x, seq_binary, file="model.keras")


def main():
    if "--keras3-only" in sys.argv:
        keras3_cases()
        return
    if "--saturated-only" in sys.argv:
        saturated_cases()
        return
    x = rng.normal(0, 1, (B, T, F)).astype(np.float32)
    weights = rng.uniform(0.2, 2.0, B).astype(np.float32)

    labels = rng.integers(0, 6, B)
    save_case("sparse_categorical", lstm_model(6, "softmax"), "sparse_categorical_crossentropy",
              ["accuracy"], x, labels.astype(np.int64))
    save_case("sparse_categorical_logits_weighted", lstm_model(6, None),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              ["accuracy"], x, labels.astype(np.int64), weights,
              loss_name="sparse_categorical_crossentropy")
    onehot = np.eye(6, dtype=np.float32)[labels]
    save_case("categorical_topk", lstm_model(6, "softmax"), "categorical_crossentropy",
              ["accuracy", "top_k_categorical_accuracy"], x, onehot)
    binary = rng.integers(0, 2, (B, 1)).astype(np.float32)
    save_case("binary_weighted", lstm_model(1, "sigmoid"), "binary_crossentropy", ["accuracy"],
              x, binary, weights)
    save_case("binary_logits", lstm_model(1, None),
              keras.losses.BinaryCrossentropy(from_logits=True), ["accuracy"], x, binary,
              loss_name="binary_crossentropy")

    target = rng.normal(0, 1, (B, 2)).astype(np.float32)
    rmse = keras.metrics.RootMeanSquaredError(name="rmse")
    save_case("mse_regression", lstm_model(2, None), "mse", ["mae", "mse", rmse], x, target)
    save_case("mae_weighted", lstm_model(2, None), "mae", ["mse"], x, target, weights)
    positive = rng.uniform(0.5, 3.0, (B, 2)).astype(np.float32)
    save_case("mape", lstm_model(2, "softplus"), "mape", ["mae"], x, positive)
    save_case("msle", lstm_model(2, "softplus"), "msle", ["mse"], x, positive)
    save_case("huber", lstm_model(2, None), keras.losses.Huber(), ["mae"], x, target,
              loss_name="huber")
    save_case("log_cosh", lstm_model(2, None), "log_cosh", ["mae"], x, target)
    seq_target = rng.normal(0, 1, (B, T, 2)).astype(np.float32)
    save_case("sequence_mse_weighted", lstm_model(2, None, seq=True), "mse", ["mae"], x,
              seq_target, weights)
    keras3_cases()
    saturated_cases()


if __name__ == "__main__":
    main()
