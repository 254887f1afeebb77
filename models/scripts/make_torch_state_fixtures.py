#!/usr/bin/env python3
"""PyTorch recurrent models with initial states, and without them, exported by torch.onnx.export.

Writes tests/fixtures/torch_state/<Case>/{model.onnx,data.npz}:

* h0 / c0 as graph inputs ([num_layers * num_directions, batch, hidden], batch on axis 1),
  batch_first and time-major, stacked and bidirectional, LSTM and GRU, with h_n / c_n outputs;
  TorchLstmDocsRecipeH0C0 is docs/import-onnx.md's recipe as written. data.npz holds, for each
  batch size B in BATCHES, in_<k>_b<B> (the inputs in the file's layout, random states) and
  out_<k>_b<B> (PyTorch's outputs, float64).
* Causal nn.LSTM / nn.GRU + nn.Linear with no initial state: the exporter builds the zero state
  from Shape(x) (Shape -> Gather -> Unsqueeze -> Concat -> ConstantOfShape). data.npz holds in_0
  [B, T, F] and out_0, PyTorch's outputs on the whole sequences, which streamed chunks must give.

Each export is checked against onnxruntime first. Run with the fixture environment:
  /opt/fixenv/bin/python models/scripts/make_torch_state_fixtures.py
"""

import io
import os
import warnings

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_state")
BATCHES = (1, 2, 4)
T = 9


class WithStates(nn.Module):
    """A recurrent layer with a Linear head that takes and returns its states."""

    def __init__(self, rnn, head):
        super().__init__()
        self.rnn, self.head = rnn, head

    def forward(self, x, h0, c0=None):
        if isinstance(self.rnn, nn.LSTM):
            y, (hn, cn) = self.rnn(x, (h0, c0))
            return self.head(y), hn, cn
        y, hn = self.rnn(x, h0)
        return self.head(y), hn


class Causal(nn.Module):
    """What a streaming user exports: a causal recurrent layer and a per-step head."""

    def __init__(self, rnn, head):
        super().__init__()
        self.rnn, self.head = rnn, head

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def randomize(module):
    module.eval()
    for p in module.parameters():  # random, never constant
        nn.init.normal_(p, std=0.4)
    return module


def write_case(name, model_bytes, arrays):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    np.savez(os.path.join(d, "data.npz"), **arrays)
    print(f"torch_state/{name}: {len(model_bytes)} bytes")


def reference(module, inputs):
    with torch.no_grad():
        ref = module.double()(*[t.double() for t in inputs])
    module.float()
    return ref if isinstance(ref, tuple) else (ref,)


def check_onnxruntime(model_bytes, names, inputs, ref):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    got = sess.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-4, atol=1e-5)


def state_inputs(module, b, batch_first, seed):
    g = torch.Generator().manual_seed(seed)
    rnn = module.rnn
    x = torch.randn((b, T, rnn.input_size) if batch_first else (T, b, rnn.input_size), generator=g)
    lead = rnn.num_layers * (2 if rnn.bidirectional else 1)
    states = [torch.randn(lead, b, rnn.hidden_size, generator=g)
              for _ in range(2 if isinstance(rnn, nn.LSTM) else 1)]
    return [x] + states


def state_case(name, module, model_bytes, names, batch_first):
    arrays = {}
    for b in BATCHES:
        inputs = state_inputs(module, b, batch_first, seed=1000 + b)
        ref = reference(module, inputs)
        check_onnxruntime(model_bytes, names, inputs, ref)
        arrays.update({f"in_{k}_b{b}": t.numpy() for k, t in enumerate(inputs)})
        arrays.update({f"out_{k}_b{b}": r.numpy() for k, r in enumerate(ref)})
    write_case(name, model_bytes, arrays)


def docs_recipe():
    """docs/import-onnx.md, "Initial states as inputs", as written."""
    n_features, hidden, num_layers, dirs = 6, 32, 1, 1
    model = randomize(WithStates(nn.LSTM(n_features, hidden, batch_first=True),
                                 nn.Linear(hidden, 3)))
    example = torch.randn(2, 50, n_features)       # [batch, time, features]
    h0 = torch.zeros(num_layers * dirs, 2, hidden)
    c0 = torch.zeros(num_layers * dirs, 2, hidden)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example, h0, c0), f, opset_version=17, dynamo=False,
                          input_names=["x", "h0", "c0"], output_names=["y", "hn", "cn"],
                          dynamic_axes={"x": {0: "batch", 1: "time"}, "h0": {1: "batch"},
                                        "c0": {1: "batch"}})
    state_case("TorchLstmDocsRecipeH0C0", model, f.getvalue(), ["x", "h0", "c0"], True)


def export_states(name, rnn, head_in, batch_first):
    model = randomize(WithStates(rnn, nn.Linear(head_in, 3)))
    lstm = isinstance(rnn, nn.LSTM)
    names = ["x", "h0", "c0"] if lstm else ["x", "h0"]
    out_names = ["y", "hn", "cn"] if lstm else ["y", "hn"]
    dyn = {"x": {0: "batch", 1: "time"} if batch_first else {0: "time", 1: "batch"}}
    for n in names[1:]:
        dyn[n] = {1: "batch"}
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(state_inputs(model, 2, batch_first, seed=7)), f,
                          opset_version=17, dynamo=False, input_names=names,
                          output_names=out_names, dynamic_axes=dyn)
    state_case(name, model, f.getvalue(), names, batch_first)


def export_causal(name, rnn):
    model = randomize(Causal(rnn, nn.Linear(rnn.hidden_size, 3)))
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 5, rnn.input_size),), f, opset_version=17,
                          dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch", 1: "time"},
                                        "y": {0: "batch", 1: "time"}})
    g = torch.Generator().manual_seed(31)
    x = torch.randn(3, 12, rnn.input_size, generator=g)
    ref = reference(model, [x])
    check_onnxruntime(f.getvalue(), ["x"], [x], ref)
    write_case(name, f.getvalue(), {"in_0": x.numpy(), "out_0": ref[0].numpy()})


def main():
    torch.manual_seed(20261128)
    F, H = 4, 8
    docs_recipe()
    export_states("TorchLstmTimeMajorStackedBidirectionalH0C0",
                  nn.LSTM(F, H, num_layers=2, bidirectional=True), 2 * H, batch_first=False)
    export_states("TorchLstmBatchFirstStackedBidirectionalH0C0",
                  nn.LSTM(F, H, num_layers=2, bidirectional=True, batch_first=True), 2 * H,
                  batch_first=True)
    export_states("TorchGruBatchFirstStackedH0",
                  nn.GRU(F, H, num_layers=2, batch_first=True), H, batch_first=True)
    export_states("TorchGruTimeMajorBidirectionalH0",
                  nn.GRU(F, H, bidirectional=True), 2 * H, batch_first=False)
    export_causal("TorchLstmCausalLinearZeroState", nn.LSTM(F, H, batch_first=True))
    export_causal("TorchLstmStackedCausalLinearZeroState",
                  nn.LSTM(F, H, num_layers=2, batch_first=True))
    export_causal("TorchGruCausalLinearZeroState", nn.GRU(F, H, batch_first=True))


if __name__ == "__main__":
    main()
