#!/usr/bin/env python3
"""Makes the fixtures of tests/unit/cpu_row_split_test.cc with the real frameworks.

The row split of the CPU recurrent kernel (engine/cpu/recurrent.h) gives each thread a block of
rows; these cases have batches of 9 (uneven blocks for 2 and 3 threads), mixed lengths and
masked steps inside sequences, at the widths real Keras files have (16 to 64 units).

Every case is one .npz under tests/fixtures/cpu_rows/<case>.npz in the layout of
models/scripts/make_cpu_fixtures.py (per direction W{d} [G*H, I], R{d} [G*H, H], bW{d}, bR{d}
in the canonical gate order; x, lengths, h0/c0; the framework's y, hN, cN). Weights and inputs
are drawn at random, rounded to float32 (stored as float32, exactly what the frameworks ran on),
and run in float64: Keras 2 (tf_keras) with Masking for Keras semantics, PyTorch with packed
sequences for lengths.

Usage: /opt/fixenv/bin/python tests/unit/make_cpu_row_split_fixtures.py
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "cpu_rows")
RNG = np.random.default_rng(20261128)
B, T, I = 9, 12, 10
LENGTHS = [12, 5, 1, 12, 8, 3, 12, 7, 2]
# (row, step) pairs masked inside the lengths (Keras cases).
INTERIOR = [(0, 2), (0, 3), (3, 0), (4, 5), (6, 11), (7, 1)]


def rnd(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32).astype(np.float64)


def save(name, **arrays):
    os.makedirs(OUT, exist_ok=True)
    arrays = {k: np.ascontiguousarray(v, dtype=np.int64 if k == "lengths" else np.float32)
              for k, v in arrays.items()}
    np.savez_compressed(os.path.join(OUT, name + ".npz"), **arrays)
    print(f"{name}: " + ", ".join(f"{k}{list(np.shape(v))}" for k, v in arrays.items()))


def keras_cases():
    import tf_keras as K
    K.backend.set_floatx("float64")
    x = rnd(B, T, I, scale=1.0)
    for b, n in enumerate(LENGTHS):
        x[b, n:] = 0.0
    for b, t in INTERIOR:
        x[b, t] = 0.0
    cases = [  # name, layer class, units, options
        ("KerasLstmRows48", K.layers.LSTM, 48, dict()),
        ("KerasLstmRows16GoBackwards", K.layers.LSTM, 16, dict(go_backwards=True)),
        ("KerasGruRows48ResetAfter", K.layers.GRU, 48, dict(reset_after=True)),
        ("KerasGruRows32ResetBefore", K.layers.GRU, 32, dict(reset_after=False)),
        ("KerasSimpleRnnRows64", K.layers.SimpleRNN, 64, dict()),
    ]
    for name, cls, H, opts in cases:
        rnn = cls(H, return_sequences=True, return_state=True, **opts)
        inp = K.Input(shape=(T, I), dtype="float64")
        model = K.Model(inp, rnn(K.layers.Masking(0.0)(inp)))
        # Scaled as Keras initialises (~1/sqrt(H)): larger recurrent gains amplify rounding
        # over the steps past what an FP32 comparison can resolve.
        rnn.set_weights([rnd(*w.shape, scale=1.5 / np.sqrt(H)) for w in rnn.get_weights()])
        kernel, rec, bias = rnn.get_weights()
        perm = lambda a: a
        if cls is K.layers.GRU:  # Keras z, r, h -> canonical r, z, n
            perm = lambda a: np.concatenate([a[..., H:2 * H], a[..., :H], a[..., 2 * H:]], -1)
        bW, bR = (perm(bias[0]), perm(bias[1])) if bias.ndim == 2 else (perm(bias), 0 * bias)
        res = model.predict(x, verbose=0)
        arrays = dict(x=x, W0=perm(kernel).T, R0=perm(rec).T, bW0=bW, bR0=bR, y=res[0],
                      hN=res[1][None])
        if cls is K.layers.LSTM:
            arrays["cN"] = res[2][None]
        save(name, **arrays)


def torch_cases():
    import torch

    def randomize(m):
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.from_numpy(rnd(*p.shape, scale=1.5 / np.sqrt(m.hidden_size))))

    lengths = np.array(LENGTHS, dtype=np.int64)
    for name, cls, H, dirs, kw in [
        ("TorchLstmRows64", torch.nn.LSTM, 64, 1, {}),
        ("TorchGruRows48Bidirectional", torch.nn.GRU, 48, 2, {}),
        ("TorchRnnRows16", torch.nn.RNN, 16, 1, dict(nonlinearity="tanh")),
    ]:
        m = cls(input_size=I, hidden_size=H, batch_first=True, bidirectional=dirs == 2,
                dtype=torch.float64, **kw)
        randomize(m)
        x = rnd(B, T, I, scale=1.0)
        h0 = rnd(dirs, B, H)
        lstm = cls is torch.nn.LSTM
        c0 = rnd(dirs, B, H) if lstm else None
        init = (torch.from_numpy(h0), torch.from_numpy(c0)) if lstm else torch.from_numpy(h0)
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            torch.from_numpy(x), torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        out, state = m(packed, init)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)
        arrays = dict(x=x, lengths=lengths, h0=h0, y=y.detach().numpy())
        for d in range(dirs):
            sfx = "_reverse" if d == 1 else ""
            g = lambda n: getattr(m, n + sfx).detach().numpy()
            arrays.update({f"W{d}": g("weight_ih_l0"), f"R{d}": g("weight_hh_l0"),
                           f"bW{d}": g("bias_ih_l0"), f"bR{d}": g("bias_hh_l0")})
        if lstm:
            arrays.update(c0=c0, hN=state[0].detach().numpy(), cN=state[1].detach().numpy())
        else:
            arrays["hN"] = state.detach().numpy()
        save(name, **arrays)


if __name__ == "__main__":
    keras_cases()
    torch_cases()
