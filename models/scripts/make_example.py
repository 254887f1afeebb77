#!/usr/bin/env python3
"""Builds the example model served by deploy/serve.sh: a small stacked-LSTM classifier of
waveforms (sine, square, sawtooth), trained for a few epochs with real Keras (tf-keras 2.x) and
saved as a Keras 2 HDF5 file, exactly as a user's model.save('model.h5') writes it.

Writes, relative to the repository root:
  models/examples/waveform_lstm/1/model.h5     the model
  models/examples/waveform_lstm/sample_input.json  three sequences of different lengths
  tests/fixtures/example/input.npy, lengths.npy, expected.npy  Keras's own predictions

Run: pip install tensorflow-cpu tf-keras numpy && python3 models/scripts/make_example.py
"""
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tf_keras as keras

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T, F, CLASSES = 40, 2, 3


def waveform(kind, length, rng):
    """Two noisy channels of one waveform kind, `length` steps, zero-padded to T."""
    freq = rng.uniform(0.05, 0.2)
    phase = rng.uniform(0, 2 * np.pi)
    t = np.arange(length) * freq * 2 * np.pi + phase
    if kind == 0:
        base = np.sin(t)
    elif kind == 1:
        base = np.sign(np.sin(t))
    else:
        base = 2 * ((t / (2 * np.pi)) % 1.0) - 1
    x = np.zeros((T, F), np.float32)
    x[:length, 0] = base + rng.normal(0, 0.1, length)
    x[:length, 1] = np.cumsum(base) / length + rng.normal(0, 0.05, length)
    return x


def dataset(n, rng):
    xs, ys = [], []
    for _ in range(n):
        kind = rng.integers(CLASSES)
        length = rng.integers(10, T + 1)
        xs.append(waveform(kind, length, rng))
        ys.append(kind)
    return np.stack(xs), np.array(ys)


def main():
    rng = np.random.default_rng(7)
    keras.utils.set_random_seed(7)
    model = keras.Sequential([
        keras.layers.Masking(mask_value=0.0, input_shape=(None, F), name="masking"),
        keras.layers.LSTM(32, return_sequences=True, name="lstm_1"),
        keras.layers.LSTM(16, name="lstm_2"),
        keras.layers.Dense(CLASSES, activation="softmax", name="probabilities"),
    ], name="waveform_lstm")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    x, y = dataset(1500, rng)
    model.fit(x, y, epochs=8, batch_size=64, verbose=0)
    xv, yv = dataset(300, rng)
    loss, acc = model.evaluate(xv, yv, verbose=0)
    print(f"validation loss {loss:.3f} accuracy {acc:.3f}")

    out_dir = os.path.join(ROOT, "models/examples/waveform_lstm/1")
    os.makedirs(out_dir, exist_ok=True)
    model.save(os.path.join(out_dir, "model.h5"))

    # Three sequences of lengths 40, 25 and 12, zero-padded to 40 steps.
    lengths = np.array([40, 25, 12], np.int32)
    sample = np.stack([waveform(k, n, rng) for k, n in zip([0, 1, 2], lengths)])
    with open(os.path.join(ROOT, "models/examples/waveform_lstm/sample_input.json"), "w") as f:
        json.dump({"waveform": np.round(sample, 5).tolist()}, f)
    sample = np.round(sample, 5).astype(np.float32)
    expected = model.predict(sample, verbose=0).astype(np.float64)
    fix = os.path.join(ROOT, "tests/fixtures/example")
    os.makedirs(fix, exist_ok=True)
    np.save(os.path.join(fix, "input.npy"), sample)
    np.save(os.path.join(fix, "lengths.npy"), lengths)
    np.save(os.path.join(fix, "expected.npy"), expected)
    print("expected", expected)


if __name__ == "__main__":
    main()
