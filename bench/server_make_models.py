#!/usr/bin/env python3
"""Builds the models the server benchmarks serve, random weights, saved by real Keras
(tf-keras 2.x) as Keras 2 HDF5 files, each in two model directories that differ only in
config.pbtxt (<name>: max_batch_size 1, batching off; <name>_batched: max_batch_size 64 with
dynamic_batching, 200 us):

  tiny_lstm   8 features -> LSTM(32) -> Dense(4, softmax); the benchmarks send T=10
  lstm256     16 features -> LSTM(256) -> Dense(4, softmax); T=50, a model whose engine time
              is a real part of each request (lstm256_batched's model.h5 links to lstm256's)

Run: pip install tensorflow-cpu tf-keras numpy && python3 bench/server_make_models.py [NAME...]
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tf_keras as keras

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "server_models")
CLASSES = 4
# name: (features, hidden units, seed, title, batched copy is a link)
MODELS = {
    "tiny_lstm": (8, 32, 7, "Tiny LSTM (H=32)", False),
    "lstm256": (16, 256, 17, "LSTM (H=256, 16 features)", True),
}


def config(name, features, title, batched):
    lines = [f"# {title} for server benchmarks, "
             f"{'dynamic batching on' if batched else 'batching off'}.",
             f'name: "{name}{"_batched" if batched else ""}"',
             'platform: "keras_h5"',
             f"max_batch_size: {64 if batched else 1}",
             f'input {{ name: "x" data_type: TYPE_FP32 dims: [ -1, {features} ] }}',
             f'output {{ name: "y" data_type: TYPE_FP32 dims: [ {CLASSES} ] }}',
             "instance_group { kind: KIND_CPU count: 1 }"]
    if batched:
        lines.append("dynamic_batching { max_queue_delay_microseconds: 200 }")
    lines += ["# One engine thread: perf_analyzer shares the machine's cores with the server.",
              "optimization { cpu_threads: 1 }"]
    return "\n".join(lines) + "\n"


def make(name):
    features, hidden, seed, title, link = MODELS[name]
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.layers.Input(shape=(None, features), name="x"),
        keras.layers.LSTM(hidden, name="lstm"),
        keras.layers.Dense(CLASSES, activation="softmax", name="y"),
    ])
    for batched in (False, True):
        d = os.path.join(OUT, name + ("_batched" if batched else ""))
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        path = os.path.join(d, "1", "model.h5")
        if batched and link:
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(os.path.join("..", "..", name, "1", "model.h5"), path)
        else:
            model.save(path)
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(config(name, features, title, batched))


if __name__ == "__main__":
    for n in sys.argv[1:] or MODELS:
        make(n)
