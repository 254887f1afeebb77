#!/usr/bin/env python3
"""Builds the models the server benchmarks serve: a tiny LSTM (8 features -> LSTM(32) ->
Dense(4)), random weights, saved by real Keras (tf-keras 2.x) as a Keras 2 HDF5 file, in two
model directories that differ only in config.pbtxt:

  bench/server_models/tiny_lstm/          max_batch_size 1: batching off
  bench/server_models/tiny_lstm_batched/  max_batch_size 64 with dynamic_batching

Run: pip install tensorflow-cpu tf-keras numpy && python3 bench/server_make_tiny_model.py
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tf_keras as keras

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "server_models")
F, H, CLASSES = 8, 32, 4

CONFIGS = {
    "tiny_lstm": """# Tiny LSTM (H=32) for server benchmarks, batching off.
name: "tiny_lstm"
platform: "keras_h5"
max_batch_size: 1
input { name: "x" data_type: TYPE_FP32 dims: [ -1, 8 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
instance_group { kind: KIND_CPU count: 1 }
# One engine thread: perf_analyzer shares the machine's cores with the server.
optimization { cpu_threads: 1 }
""",
    "tiny_lstm_batched": """# Tiny LSTM (H=32) for server benchmarks, dynamic batching on.
name: "tiny_lstm_batched"
platform: "keras_h5"
max_batch_size: 64
input { name: "x" data_type: TYPE_FP32 dims: [ -1, 8 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
instance_group { kind: KIND_CPU count: 1 }
dynamic_batching { max_queue_delay_microseconds: 200 }
# One engine thread: perf_analyzer shares the machine's cores with the server.
optimization { cpu_threads: 1 }
""",
}


def main():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([
        keras.layers.Input(shape=(None, F), name="x"),
        keras.layers.LSTM(H, name="lstm"),
        keras.layers.Dense(CLASSES, activation="softmax", name="y"),
    ])
    for name, config in CONFIGS.items():
        os.makedirs(os.path.join(OUT, name, "1"), exist_ok=True)
        model.save(os.path.join(OUT, name, "1", "model.h5"))
        with open(os.path.join(OUT, name, "config.pbtxt"), "w") as f:
            f.write(config)


if __name__ == "__main__":
    main()
