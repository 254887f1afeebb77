#!/usr/bin/env python3
"""Builds the generation fixtures: two tiny character-level language models trained briefly and
deterministically by real Keras (tf-keras, saved as Keras 2 .h5) on a public-domain paragraph
shipped in the repository (tests/fixtures/generation/alice.txt, the opening of Lewis Carroll's
"Alice's Adventures in Wonderland", 1865), each with the vocabulary JSON beside it as
textgenrnn writes it (token -> id; id 0 is the padding and is never a character).

  alice_lstm    Embedding -> LSTM(return_sequences) -> Dense(softmax): a stateful causal LM,
                 a next-character distribution at every step.
  alice_window  the last W=16 characters in (left-padded with 0 as Keras's pad_sequences
                 does), Embedding -> LSTM -> Dense(softmax): the next character's distribution.

For each model, expected.json holds Keras's own greedy loop (the argmax of model(x) appended one
token at a time, 200 tokens) for a fixed prompt, the smallest gap between the best and second
best probabilities along that loop (so that a float rounding cannot flip a step), and the
softmax of the first generated step (the reference of the sampling frequency test).
tests/integration/generation_test.py and tests/unit/generation_*_test.cc read them.

  /opt/fixenv/bin/python models/scripts/make_generation_fixtures.py
"""

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as k  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "tests" / "fixtures" / "generation"
TEXT = (DIR / "alice.txt").read_text()
WINDOW = 16
TOKENS = 200
PROMPT = "Alice was "

CONFIG = """# Made by models/scripts/make_generation_fixtures.py with tf-keras (see its docstring).
name: "{name}"
platform: "keras_h5"
max_batch_size: 256
instance_group {{
  kind: KIND_CPU
  count: 1
}}
"""


def vocabulary():
    chars = sorted(set(TEXT))
    return {c: i + 1 for i, c in enumerate(chars)}  # 0: padding, as textgenrnn's


def train_lm(vocab, ids):
    v = len(vocab) + 1
    m = k.Sequential([
        k.layers.Embedding(v, 8, input_shape=(None,)),
        k.layers.LSTM(32, return_sequences=True),
        k.layers.Dense(v, activation="softmax"),
    ])
    t = 32
    starts = range(0, len(ids) - t - 1, 3)
    x = np.array([ids[s:s + t] for s in starts], np.int32)
    y = np.array([ids[s + 1:s + t + 1] for s in starts], np.int32)
    m.compile(optimizer=k.optimizers.Adam(0.02), loss="sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=32, epochs=25, shuffle=False, verbose=0)
    return m


def train_window(vocab, ids):
    v = len(vocab) + 1
    m = k.Sequential([
        k.layers.Embedding(v, 8, input_length=WINDOW),
        k.layers.LSTM(32),
        k.layers.Dense(v, activation="softmax"),
    ])
    padded = [0] * WINDOW + ids
    x = np.array([padded[s:s + WINDOW] for s in range(len(ids))], np.int32)
    y = np.array([padded[s + WINDOW] for s in range(len(ids))], np.int32)
    m.compile(optimizer=k.optimizers.Adam(0.02), loss="sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=32, epochs=25, shuffle=False, verbose=0)
    return m


def greedy(next_probs, prompt_ids):
    """Keras's greedy loop: the argmax appended one token at a time."""
    ids = list(prompt_ids)
    out, margin, first = [], 1.0, None
    for _ in range(TOKENS):
        p = next_probs(ids)
        if first is None:
            first = p
        top = np.sort(p)[::-1]
        margin = min(margin, float(top[0] - top[1]))
        ids.append(int(np.argmax(p)))
        out.append(ids[-1])
    return out, margin, first


def write(name, model, vocab, next_probs):
    d = DIR / "repo" / name
    if d.exists():
        shutil.rmtree(d)
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(CONFIG.format(name=name))
    model.save(d / "1" / "model.h5", save_format="h5", include_optimizer=False)
    (d / "1" / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    # The saved file is the reference: reload it and run Keras's loop on it.
    saved = k.models.load_model(d / "1" / "model.h5")
    prompt_ids = [vocab[c] for c in PROMPT]
    out, margin, first = greedy(lambda ids: next_probs(saved, ids), prompt_ids)
    if margin < 1e-4:
        raise SystemExit(f"{name}: greedy margin {margin} too small to compare token for token")
    inverse = {i: c for c, i in vocab.items()}
    return {
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "greedy_ids": out,
        "greedy_text": "".join(inverse.get(i, "") for i in out),
        "greedy_min_margin": margin,
        "first_step_probs": [float(x) for x in first],
        "window": WINDOW if name == "alice_window" else 0,
        "vocab_size": len(vocab) + 1,
        "keras": k.__version__,
    }


def lm_next(model, ids):
    return model(np.array([ids], np.int32), training=False).numpy()[0, -1].astype(np.float64)


def window_next(model, ids):
    w = ([0] * WINDOW + list(ids))[-WINDOW:]
    return model(np.array([w], np.int32), training=False).numpy()[0].astype(np.float64)


def main():
    tf.keras.utils.set_random_seed(42)
    tf.config.experimental.enable_op_determinism()
    vocab = vocabulary()
    ids = [vocab[c] for c in TEXT]
    expected = {}
    expected["alice_lstm"] = write("alice_lstm", train_lm(vocab, ids), vocab, lm_next)
    tf.keras.utils.set_random_seed(43)
    expected["alice_window"] = write("alice_window", train_window(vocab, ids), vocab, window_next)
    (DIR / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    for n, e in expected.items():
        print(n, repr(e["greedy_text"][:80]), "margin", e["greedy_min_margin"])


if __name__ == "__main__":
    main()
