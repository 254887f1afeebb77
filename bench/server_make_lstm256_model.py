#!/usr/bin/env python3
"""Builds the larger model the server benchmarks serve, one whose engine time is a real part of
each request: 16 features -> LSTM(256) -> Dense(4, softmax), random weights, saved by real Keras
(tf-keras 2.x) as a Keras 2 HDF5 file. The benchmarks send T=50 steps per sequence.

  bench/server_models/lstm256/          max_batch_size 1: batching off
  bench/server_models/lstm256_batched/  max_batch_size 64 with dynamic_batching; its model.h5
                                        is a link to lstm256's, so the file is stored once

Run: pip install tensorflow-cpu tf-keras numpy && python3 bench/server_make_lstm256_model.py
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tf_keras as keras

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "server_models")
F, H, CLASSES = 16, 256, 4

CONFIGS = {
    "lstm256": """# LSTM (H=256, 16 features) for server benchmarks, batching off.
name: "lstm256"
platform: "keras_h5"
max_batch_size: 1
input { name: "x" data_type: TYPE_FP32 dims: [ -1, 16 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
instance_group { kind: KIND_CPU count: 1 }
# One engine thread: perf_analyzer shares the machine's cores with the server.
optimization { cpu_threads: 1 }
""",
    "lstm256_batched": """# LSTM (H=256, 16 features) for server benchmarks, dynamic batching on.
name: "lstm256_batched"
platform: "keras_h5"
max_batch_size: 64
input { name: "x" data_type: TYPE_FP32 dims: [ -1, 16 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
instance_group { kind: KIND_CPU count: 1 }
dynamic_batching { max_queue_delay_microseconds: 200 }
# One engine thread: perf_analyzer shares the machine's cores with the server.
optimization { cpu_threads: 1 }
""",
}


def main():
    keras.utils.set_random_seed(17)
    model = keras.Sequential([
        keras.layers.Input(shape=(None, F), name="x"),
        keras.layers.LSTM(H, name="lstm"),
        keras.layers.Dense(CLASSES, activation="softmax", name="y"),
    ])
    for name, config in CONFIGS.items():
        os.makedirs(os.path.join(OUT, name, "1"), exist_ok=True)
        with open(os.path.join(OUT, name, "config.pbtxt"), "w") as f:
            f.write(config)
    path = os.path.join(OUT, "lstm256", "1", "model.h5")
    model.save(path)
    link = os.path.join(OUT, "lstm256_batched", "1", "model.h5")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join("..", "..", "lstm256", "1", "model.h5"), link)


if __name__ == "__main__":
    main()
