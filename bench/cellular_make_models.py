#!/usr/bin/env python3
"""Builds the extra models of the step-level batching benchmark (bench/cellular_bench.py), random
weights, saved by real Keras (tf-keras 2.x) as Keras 2 HDF5 files under OUT/<name>/1/model.h5
(not committed: lstm1024 is 17 MB). The one-layer H=256 model is bench/server_models/lstm256.

  lstm256x2  16 features -> LSTM(256, return_sequences) -> LSTM(256) -> Dense(4, softmax)
  lstm1024   16 features -> LSTM(1024) -> Dense(4, softmax)
  lstm256_only  16 features -> LSTM(256), its last h the output: a model the GPU engine's
             resident step loop runs whole (cellular_batching.resident_step_loop), which a
             Dense head rules out

Run: pip install tensorflow-cpu tf-keras && python3 bench/cellular_make_models.py [OUT]
(OUT defaults to build/cellular-models.)
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tf_keras as keras

# name: (LSTM units by layer, seed, whether a Dense(4, softmax) head follows)
MODELS = {"lstm256x2": ([256, 256], 23, True), "lstm1024": ([1024], 29, True),
          "lstm256_only": ([256], 31, False)}


def make(out, name):
    units, seed, head = MODELS[name]
    keras.utils.set_random_seed(seed)
    layers = [keras.layers.Input(shape=(None, 16), name="x")]
    for i, u in enumerate(units):
        layers.append(keras.layers.LSTM(u, return_sequences=i + 1 < len(units), name=f"lstm{i}"))
    if head:
        layers.append(keras.layers.Dense(4, activation="softmax", name="y"))
    path = os.path.join(out, name, "1", "model.h5")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    keras.Sequential(layers).save(path)
    print(path)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "build/cellular-models"
    for n in MODELS:
        make(out, n)
