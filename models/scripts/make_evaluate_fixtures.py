#!/usr/bin/env python3
"""Fixtures for Evaluate: small Keras models compiled with each loss and metric rnnserve
supports, and what Keras's own model.evaluate returns for them.

Each case directory tests/fixtures/evaluate/<case>/ holds:
  1/model.h5     the compiled model as model.save writes it (its training_config names the loss);
                 the folder is a model repository: each case is a model of version 1
  x.npy, y.npy   inputs and targets; w.npy sample weights when the case uses them
  expected.json  {"loss": ..., "metrics": {...}, "loss_name": ..., "metric_names": [...]}:
                 model.evaluate(x, y, sample_weight=w, return_dict=True) from real Keras

Run: pip install tensorflow-cpu tf-keras numpy && python3 models/scripts/make_evaluate_fixtures.py
"""
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tf_keras as keras

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/fixtures/evaluate")
rng = np.random.default_rng(11)
B, T, F = 12, 6, 3


def lstm_model(units_out, activation, seq=False):
    inp = keras.Input((T, F), name="x")
    h = keras.layers.LSTM(8, return_sequences=seq, name="lstm")(inp)
    if seq:
        out = keras.layers.TimeDistributed(keras.layers.Dense(units_out, activation=activation),
                                           name="head")(h)
    else:
        out = keras.layers.Dense(units_out, activation=activation, name="head")(h)
    model = keras.Model(inp, out, name="m")
    # Random, not trained: the weights only need to be the ones Keras evaluates with.
    for w in model.weights:
        w.assign(rng.normal(0, 0.6, w.shape).astype(np.float32))
    return model


def save_case(name, model, loss, metrics, x, y, w=None, loss_name=None):
    model.compile(optimizer="adam", loss=loss, metrics=metrics)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    # Evaluate before saving: Keras resolves "accuracy" from the data's shapes on first use, and
    # the file then records the resolved function (as a user's trained model does).
    result = model.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0, return_dict=True)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    model.save(os.path.join(d, "1", "model.h5"))
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


def main():
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


if __name__ == "__main__":
    main()
