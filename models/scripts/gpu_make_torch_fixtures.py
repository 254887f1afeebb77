#!/usr/bin/env python3
"""Builds the PyTorch recurrent fixtures: nn.LSTM / nn.GRU / nn.RNN with random weights, run by
PyTorch itself on padded batches of mixed lengths (pack_padded_sequence), in float64.

Each case goes to tests/fixtures/torch/<CaseName>/:
  weights.npz   the module's state_dict in float32 (PyTorch's names: weight_ih_l0,
                weight_hh_l0_reverse, bias_ih_l0, weight_hr_l0, ...) plus `config`:
                int64 [cell, input_size, hidden_size, proj_size, num_layers, bidirectional]
                with cell 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu
  input_0.npy   x [B, T, I] float32 (zero past each length)
  lengths.npy   [B] int64
  expected_0.npy  output [B, T, dirs*H'] (zero past each length: pad_packed_sequence)
  expected_1.npy  h_n [layers*dirs, B, H'] (state at each sequence's last valid step)
  expected_2.npy  c_n [layers*dirs, B, H] (LSTM only)
Expected outputs are computed by a float64 copy of the module holding the same float32 weights,
so they are the exact answer for the stored weights. PyTorch's gate orders (LSTM i,f,g,o; GRU
r,z,n) are the IR's; PyTorch's GRU applies the reset gate after the recurrent matmul.
tests/gpu/gpu_torch_test.cc has one test per case, named like the case.

Needs: torch, numpy.   python3 models/scripts/gpu_make_torch_fixtures.py [--out DIR] [--only CASE...]
"""

import argparse
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]

# name: (cell, I, H, proj, layers, bidirectional, lengths, T)
CASES = {
    "TorchLstmPackedMixedLengths": ("lstm", 10, 24, 0, 1, False, [9, 4, 1, 9, 6], 9),
    "TorchLstmProjection": ("lstm", 10, 24, 8, 1, False, [7, 3, 7, 5], 7),
    "TorchLstmTwoLayerBidirectional": ("lstm", 6, 16, 0, 2, True, [8, 2, 5], 8),
    "TorchLstmBidirectionalProjection": ("lstm", 6, 16, 5, 1, True, [6, 6, 3], 6),
    "TorchGruBidirectionalMixedLengths": ("gru", 7, 20, 0, 1, True, [10, 3, 7, 1], 10),
    "TorchGruTwoLayer": ("gru", 5, 12, 0, 2, False, [6, 2, 6], 6),
    "TorchRnnTanhBidirectional": ("rnn_tanh", 4, 10, 0, 1, True, [5, 1, 4], 5),
    "TorchRnnReluTwoLayer": ("rnn_relu", 4, 10, 0, 2, False, [5, 3], 5),
    "TorchLstmWideHidden": ("lstm", 64, 128, 0, 1, False, [30, 17, 30], 30),
    "TorchGruWideHidden": ("gru", 32, 128, 0, 1, True, [25, 25, 9], 25),
}
# The widths of the fused LSTM's and GRU's thread-block-cluster kernel (engine/cuda/fused_rnn.h),
# eight sequences of mixed lengths (tests take the first 1..8); seeded apart from CASES (and the
# GRU apart from the LSTM) so that adding one here leaves those unchanged.
CLUSTER_CASES = {
    "TorchLstmClusterH256": ("lstm", 64, 256, 0, 1, False, [40, 7, 1, 40, 23, 40, 16, 31], 40),
    "TorchLstmClusterH512": ("lstm", 32, 512, 0, 1, False, [40, 9, 40, 1, 28, 40, 13, 35], 40),
}
GRU_CLUSTER_CASES = {
    "TorchGruClusterH128": ("gru", 16, 128, 0, 1, False, [30, 30, 4, 17, 1, 30, 22, 9], 30),
    "TorchGruClusterH256": ("gru", 48, 256, 0, 1, False, [40, 11, 40, 1, 26, 40, 5, 33], 40),
    "TorchGruClusterH512": ("gru", 32, 512, 0, 1, False, [40, 6, 1, 40, 19, 40, 37, 12], 40),
}
# The batch sizes of the fused batch-tiled kernel (up to 64): many sequences of mixed lengths
# (every length from 1 to T), short and narrow enough to keep the files small; tests take the
# first 1..B.
BATCHED_CASES = {
    "TorchLstmBatchedH256": ("lstm", 32, 256, 0, 1, False, [12 - (i * 5) % 12 for i in range(64)],
                             12),
    "TorchGruBatchedH256": ("gru", 32, 256, 0, 1, False, [10 - (i * 3) % 10 for i in range(48)],
                            10),
}
# Both directions of a bidirectional layer in one launch of the batch-tiled kernel: batches of
# mixed lengths (the reverse direction starts at each sequence's last valid step).
BIDIR_CASES = {
    "TorchLstmBidirectionalBatchedH128": ("lstm", 32, 128, 0, 1, True,
                                          [16 - (i * 5) % 16 for i in range(24)], 16),
    "TorchGruBidirectionalBatchedH128": ("gru", 24, 128, 0, 1, True,
                                         [14 - (i * 3) % 14 for i in range(20)], 14),
}
# Two stacked layers of one forward direction and one width: the stacked register kernel (both
# layers in one launch), 8 sequences of mixed lengths (tests take the first 1..8).
STACK_CASES = {
    "TorchLstmStackH128": ("lstm", 32, 128, 0, 2, False, [24, 5, 1, 24, 17, 9, 24, 12], 24),
    "TorchGruStackH128": ("gru", 16, 128, 0, 2, False, [20, 20, 3, 14, 1, 20, 8, 11], 20),
}
# Three stacked layers: a middle layer both reads a lower layer's ring and paces it.
STACK3_CASES = {
    "TorchLstmStack3H128": ("lstm", 32, 128, 0, 3, False, [24, 9, 1, 24, 13, 24, 5, 18], 24),
}
# The one-block kernel's widths that keep R's rows in registers (H = 32, 64).
SMALL_CASES = {
    "TorchLstmSmallH32": ("lstm", 16, 32, 0, 1, False, [20, 7, 1, 20, 13, 20, 4, 16], 20),
    "TorchGruSmallH64": ("gru", 24, 64, 0, 1, False, [30, 30, 5, 18, 1, 30, 11, 23], 30),
}
CELL_CODE = {"lstm": 0, "gru": 1, "rnn_tanh": 2, "rnn_relu": 3}


def build(cell, I, H, proj, layers, bidir):
    if cell == "lstm":
        return torch.nn.LSTM(I, H, num_layers=layers, bidirectional=bidir, batch_first=True,
                             proj_size=proj)
    if cell == "gru":
        return torch.nn.GRU(I, H, num_layers=layers, bidirectional=bidir, batch_first=True)
    return torch.nn.RNN(I, H, num_layers=layers, bidirectional=bidir, batch_first=True,
                        nonlinearity="tanh" if cell == "rnn_tanh" else "relu")


def make(name, spec, out_root, seed):
    cell, I, H, proj, layers, bidir, lengths, T = spec
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    m = build(cell, I, H, proj, layers, bidir)
    # Random weights at PyTorch's default scale, biases too (never constant).
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-1.0 / np.sqrt(H), 1.0 / np.sqrt(H))
    B = len(lengths)
    x = rng.normal(0.0, 1.0, size=(B, T, I)).astype(np.float32)
    for b, n in enumerate(lengths):
        x[b, n:, :] = 0.0
    m64 = build(cell, I, H, proj, layers, bidir).double()
    m64.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
    lens = torch.tensor(lengths, dtype=torch.int64)
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x).double(), lens,
                                                     batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        y, state = m64(packed)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=T)
    d = out_root / name
    d.mkdir(parents=True, exist_ok=True)
    arrays = {k: v.detach().numpy().astype(np.float32) for k, v in m.state_dict().items()}
    arrays["config"] = np.array([CELL_CODE[cell], I, H, proj, layers, int(bidir)], np.int64)
    np.savez(d / "weights.npz", **arrays)
    np.save(d / "input_0.npy", x)
    np.save(d / "lengths.npy", np.array(lengths, np.int64))
    np.save(d / "expected_0.npy", y.numpy())
    if cell == "lstm":
        np.save(d / "expected_1.npy", state[0].numpy())
        np.save(d / "expected_2.npy", state[1].numpy())
    else:
        np.save(d / "expected_1.npy", state.numpy())
    print(f"{name}: torch {torch.__version__}, y {tuple(y.shape)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "torch"))
    ap.add_argument("--only", nargs="*", help="case names to write (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(4)
    # Each group seeded apart from the others (1000, 2000, ...), so that adding a group or a case
    # to one leaves the others' fixtures unchanged.
    groups = [CASES, CLUSTER_CASES, GRU_CLUSTER_CASES, BATCHED_CASES, BIDIR_CASES, STACK_CASES,
              STACK3_CASES, SMALL_CASES]
    seeded = [(name, spec, 1000 * (g + 1) + i) for g, cases in enumerate(groups)
              for i, (name, spec) in enumerate(sorted(cases.items()))]
    for name, spec, seed in seeded:
        if not args.only or name in args.only:
            make(name, spec, Path(args.out), seed)


if __name__ == "__main__":
    main()
