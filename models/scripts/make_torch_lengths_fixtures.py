#!/usr/bin/env python3
"""Makes the per-sequence lengths fixtures under tests/fixtures/torch_lengths/.

PyTorch files have no sequence_lens input (torch.onnx.export cannot export packed sequences),
so a client that pads a batch sends each row's length beside it (`lengths`). Each case is a
torch.nn module exported by torch.onnx.export (TorchScript exporter, dynamic batch and time
axes) and, as the expected answer, PyTorch's output for each row run ALONE on its sequence
truncated to its length, stacked back into the padded batch:

  last-step heads (`out[:, -1]`)  the row's last real step;
  per-step outputs                the row's steps, then zeros past its length (ONNX's rule for
                                  Y under sequence_lens, which the server applies to every
                                  output with a time axis);
  h_n / c_n                       the state after the row's last real step (for a reverse
                                  direction: after its first step, having started at its last);
  length 0                        no step runs: h_n is the zero initial state, per-step outputs
                                  are zero, and a last-step head reads the recurrent layer's
                                  zero output (the head applied to zeros).

Each case folder holds model.onnx and data.npz: in_0 (the padded batch), lengths (int32 [B]),
out_<k> (the expected outputs, in the graph's order). Cases whose model cannot honour lengths
(a layer mixes time steps) hold refused.txt with the name of that layer instead of outputs.

Case names match the C++ tests in tests/conformance/torch_lengths_test.cc.

Weights are random (never constant: constant weights hide gate-order bugs).
Needs: numpy, onnx, onnxruntime, torch (CPU). Run: /opt/fixenv/bin/python <this file>
"""

import io
import os
import shutil
import warnings
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_lengths")
I, H, VOCAB = 4, 6, 11
B, T = 4, 7


class Model(nn.Module):
    """A recurrent layer (or an embedding and one) with the heads users export."""

    def __init__(self, rnn, heads, embed=False, before=None, after=None):
        super().__init__()
        self.rnn = rnn
        self.heads = heads  # of "last", "last_slice", "steps", "h_n", "c_n"
        D = 2 if rnn.bidirectional else 1
        self.lin = nn.Linear(D * rnn.hidden_size, 3)
        self.embed = nn.Embedding(VOCAB, I) if embed else None
        self.before, self.after = before, after

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        if self.before == "center":  # per-sequence normalisation: mixes time steps
            x = x - x.mean(dim=1 if self.rnn.batch_first else 0, keepdim=True)
        y, state = self.rnn(x)
        h_n, c_n = state if isinstance(state, tuple) else (state, None)
        tdim = 1 if self.rnn.batch_first else 0
        if self.after == "attention":  # softmax over time: mixes time steps
            w = torch.softmax(y.sum(dim=-1, keepdim=True), dim=tdim)
            return (self.lin((w * y).sum(dim=tdim)),)
        outs = []
        for h in self.heads:
            if h == "last":
                outs.append(self.lin(y[:, -1] if self.rnn.batch_first else y[-1]))
            elif h == "last_slice":
                outs.append(self.lin(y[:, -1:, :] if self.rnn.batch_first else y[-1:]))
            elif h == "steps":
                outs.append(self.lin(y))
            elif h == "h_n":
                outs.append(h_n)
            elif h == "c_n":
                outs.append(c_n)
        return tuple(outs)


def export(module, example, batch_first):
    names = [f"y{k}" for k in range(len(module(example)))]
    dyn = {"x": {0: "batch", 1: "time"} if batch_first else {0: "time", 1: "batch"}}
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), f, opset_version=17, dynamo=False,
                          input_names=["x"], output_names=names, dynamic_axes=dyn)
    return f.getvalue()


def row_alone(module, x, b, n, batch_first):
    """The module's outputs for row b of x truncated to n steps, run alone."""
    xb = x[b:b + 1, :n] if batch_first else x[:n, b:b + 1]
    with torch.no_grad():
        return module(xb)


def expected(module, x, lengths, batch_first):
    """Each output's padded-batch form of the rows' truncated answers."""
    outs = None
    with torch.no_grad():
        padded = module(x)  # shapes of the outputs
    outs = [np.zeros(p.shape, np.float64) for p in padded]
    rnn = module.rnn
    for b, n in enumerate(lengths):
        if n == 0:
            D = 2 if rnn.bidirectional else 1
            zero = torch.zeros(D * rnn.hidden_size, dtype=torch.float64)
            for k, h in enumerate(module.heads):
                if h in ("last", "last_slice"):
                    with torch.no_grad():
                        row = module.lin(zero).numpy()
                    if h == "last":
                        outs[k][b] = row
                    elif batch_first:
                        outs[k][b, 0] = row
                    else:
                        outs[k][0, b] = row
            continue  # steps, h_n and c_n stay zero
        got = row_alone(module, x, b, n, batch_first)
        for k, h in enumerate(module.heads):
            g = got[k].numpy()
            if h in ("h_n", "c_n"):
                outs[k][:, b] = g[:, 0]
            elif h == "last":
                outs[k][b] = g[0]
            elif batch_first:  # steps, last_slice: [1, n or 1, C]
                outs[k][b, :g.shape[1]] = g[0]
            else:
                outs[k][:g.shape[0], b] = g[:, 0]
    return outs


def case(name, module, lengths, batch_first=True, embed=False, refused_op=None):
    torch.manual_seed(zlib.crc32(name.encode()))
    module = module.eval()
    for p in module.parameters():
        nn.init.normal_(p, std=0.4)
    g = torch.Generator().manual_seed(len(name) * 7919)
    shape = (B, T) if batch_first else (T, B)
    if embed:
        x = torch.randint(1, VOCAB, shape, generator=g)
        # Padding past each length is token 0 (it must not matter).
        for b, n in enumerate(lengths):
            x[b, n:] = 0
    else:
        x = torch.randn(shape + (I,), generator=g)
    model = export(module, x[:2, :5] if batch_first else x[:5, :2], batch_first)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model)
    arrays = {"in_0": x.numpy(), "lengths": np.array(lengths, np.int32)}
    if refused_op is not None:
        nodes = [n.name for n in onnx.load_from_string(model).graph.node
                 if n.op_type == refused_op]
        assert nodes, refused_op
        with open(os.path.join(d, "refused.txt"), "w") as f:
            f.write(nodes[0] + "\n")
    else:
        module64 = module.double()
        xin = x if embed else x.double()
        outs = expected(module64, xin, lengths, batch_first)
        module.float()
        # onnxruntime on each truncated row agrees with PyTorch (a check of the export).
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        for b, n in enumerate(lengths):
            if n == 0:
                continue
            xb = x[b:b + 1, :n] if batch_first else x[:n, b:b + 1]
            got = sess.run(None, {"x": xb.numpy()})
            want = row_alone(module, x, b, n, batch_first)
            for gk, wk in zip(got, want):
                np.testing.assert_allclose(gk, wk.numpy(), rtol=1e-4, atol=1e-5)
        arrays.update({f"out_{k}": o.astype(np.float32) for k, o in enumerate(outs)})
    np.savez(os.path.join(d, "data.npz"), **arrays)
    print(f"{name}: {len(model)} bytes")


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    mixed = [7, 3, 1, 5]
    case("LstmLastStepLinear",
         Model(nn.LSTM(I, H, batch_first=True), ["last"]), mixed)
    case("LstmLastStepLengthZero",
         Model(nn.LSTM(I, H, batch_first=True), ["last", "steps", "h_n", "c_n"]), [5, 0, 7, 2])
    case("GruBidirectionalLastStep",
         Model(nn.GRU(I, H, batch_first=True, bidirectional=True), ["last"]), mixed)
    case("LstmStackedBidirectionalPerStep",
         Model(nn.LSTM(I, H, num_layers=2, batch_first=True, bidirectional=True), ["steps"]),
         [2, 7, 4, 6])
    case("GruStackedLastStepAndHn",
         Model(nn.GRU(I, H, num_layers=2, batch_first=True), ["last", "h_n"]), mixed)
    case("LstmBidirectionalHnCn",
         Model(nn.LSTM(I, H, batch_first=True, bidirectional=True), ["h_n", "c_n"]),
         [6, 1, 7, 3])
    case("LstmLastStepSlice",
         Model(nn.LSTM(I, H, batch_first=True), ["last_slice"]), mixed)
    case("RnnTanhLastStepAndSteps",
         Model(nn.RNN(I, H, batch_first=True), ["last", "steps"]), [4, 7, 2, 5])
    case("EmbeddingLstmLastStep",
         Model(nn.LSTM(I, H, batch_first=True), ["last"], embed=True), [7, 2, 5, 4],
         embed=True)
    case("LstmTimeMajorLastStepAndSteps",
         Model(nn.LSTM(I, H), ["last", "steps", "h_n"]), mixed, batch_first=False)
    case("GruTimeMajorBidirectionalLastStep",
         Model(nn.GRU(I, H, bidirectional=True), ["last"]), [3, 7, 5, 1], batch_first=False)
    # Models that cannot honour lengths: the layer that mixes time steps is named.
    case("CenteredOverTimeRefused",
         Model(nn.LSTM(I, H, batch_first=True), ["last"], before="center"), mixed,
         refused_op="ReduceMean")
    case("AttentionOverTimeRefused",
         Model(nn.GRU(I, H, batch_first=True), [], after="attention"), mixed,
         refused_op="Softmax")


if __name__ == "__main__":
    main()
