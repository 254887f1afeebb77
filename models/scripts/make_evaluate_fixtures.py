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

Run: pip install tensorflow-cpu tf-keras keras numpy h5py
     python3 models/scripts/make_evaluate_fixtures.py [--keras3-only]
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


def main():
    if "--keras3-only" in sys.argv:
        keras3_cases()
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


if __name__ == "__main__":
    main()
