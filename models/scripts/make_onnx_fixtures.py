#!/usr/bin/env python3
"""Makes the ONNX conformance fixtures under tests/fixtures/onnx/.

Two families, each case a folder with model.onnx and data.npz (in_<k> for the graph's runtime
inputs in order, out_<k> for its outputs in order):

  node/<Case>   single LSTM / GRU / RNN nodes built with onnx.helper, one per option (every
                activation with alpha/beta, clip, peepholes, input_forget, layout 1,
                linear_before_reset 0/1, mixed sequence_lens, initial states), with
                onnxruntime's outputs. onnxruntime does not run layout=1; those cases hold the
                layout-1 node and onnxruntime's outputs for the same node in layout 0, with
                inputs and outputs transposed by numpy (layout 1 is that transpose, by the spec).
  ops/<Case>    the generic ops exporters put around recurrent layers (Slice, Gather, Expand,
                Reshape, Split, MatMul, Gemm, Softmax, Reduce*, activations...), one per graph,
                with runtime data operands, with onnxruntime's outputs.
  torch/<Case>  torch.nn modules (LSTM / GRU / RNN, bidirectional, stacked, batch_first, with
                heads) exported by torch.onnx.export at opsets 14-20, with PyTorch's outputs
                computed in float64 on the same weights, at a batch and length other than the
                ones used for export (dynamic axes). Both exporters: the TorchScript one
                (dynamo=False) and the torch.export one (dynamo=True, TorchDynamo* cases).

Weights are random (never constant: constant weights hide gate-order bugs). Case names match
the C++ test names in tests/conformance/onnx_fixtures_test.cc.

Needs: numpy, onnx, onnxruntime, torch (CPU is enough), onnxscript (torch's dynamo exporter).
Run:   python3 models/scripts/make_onnx_fixtures.py
"""

import io
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "onnx")
RNG = np.random.default_rng(20261121)

T, B, I, H = 5, 3, 4, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def write_case(family, name, model_bytes, inputs, outputs):
    d = os.path.join(OUT, family, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    arrays = {f"in_{k}": v for k, v in enumerate(inputs)}
    arrays.update({f"out_{k}": v for k, v in enumerate(outputs)})
    np.savez(os.path.join(d, "data.npz"), **arrays)
    print(f"{family}/{name}: {len(model_bytes)} bytes")


def rand(*shape, scale=0.5):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Single nodes, onnxruntime as the reference.


def node_case(name, op, direction="forward", layout=0, bias=True, seq_lens=None,
              init_h=False, init_c=False, peepholes=False, outputs=("Y", "Y_h", "Y_c"),
              opset=14, dims=(T, B, I, H), rng=None, wscale=0.5, **attrs):
    T, B, I, H = dims  # noqa: N806 (the module's sizes unless given)

    def rand(*shape, scale=0.5):
        return (scale * (rng or RNG).standard_normal(shape)).astype(np.float32)

    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    weights = [numpy_helper.from_array(rand(D, G * H, I, scale=wscale), "W"),
               numpy_helper.from_array(rand(D, G * H, H, scale=wscale), "R")]
    node_inputs = ["X", "W", "R"]
    node_inputs.append("B" if bias else "")
    if bias:
        weights.append(numpy_helper.from_array(rand(D, 2 * G * H, scale=wscale), "B"))
    x = rand(T, B, I, scale=1.0)
    feeds = {"X": x}  # layout-0 values; layout 1 is transposed below
    graph_inputs = [("X", TensorProto.FLOAT)]
    node_inputs.append("sequence_lens" if seq_lens is not None else "")
    if seq_lens is not None:
        feeds["sequence_lens"] = np.array(seq_lens, np.int32)
        graph_inputs.append(("sequence_lens", TensorProto.INT32))
    node_inputs.append("initial_h" if init_h else "")
    if init_h:
        feeds["initial_h"] = rand(D, B, H, scale=1.0)
        graph_inputs.append(("initial_h", TensorProto.FLOAT))
    if op == "LSTM":
        node_inputs.append("initial_c" if init_c else "")
        if init_c:
            feeds["initial_c"] = rand(D, B, H, scale=1.0)
            graph_inputs.append(("initial_c", TensorProto.FLOAT))
        node_inputs.append("P" if peepholes else "")
        if peepholes:
            weights.append(numpy_helper.from_array(rand(D, 3 * H), "P"))
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    all_outputs = ["Y", "Y_h", "Y_c"][: 3 if op == "LSTM" else 2]
    node_outputs = [o if o in outputs else "" for o in all_outputs]
    while node_outputs[-1] == "":
        node_outputs.pop()

    def build(lay):
        extra = {"layout": lay} if lay else {}
        node = helper.make_node(op, node_inputs, node_outputs, name=f"{op.lower()}_node",
                                hidden_size=H, direction=direction, **extra, **attrs)
        tb = ["T", "B"] if lay == 0 else ["B", "T"]
        db = [D, "B"] if lay == 0 else ["B", D]
        shapes = {"X": tb + [I], "sequence_lens": ["B"], "initial_h": db + [H],
                  "initial_c": db + [H], "Y": (["T", D, "B"] if lay == 0 else ["B", "T", D]) + [H],
                  "Y_h": db + [H], "Y_c": db + [H]}
        g = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info(n, t, shapes[n]) for n, t in graph_inputs],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o])
             for o in node_outputs if o],
            weights)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="make_onnx_fixtures")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m

    ref = build(0)
    sess = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, feeds)
    names = [o for o in node_outputs if o]
    if layout == 1:
        to_batch = {"X": (1, 0, 2), "initial_h": (1, 0, 2), "initial_c": (1, 0, 2)}
        feeds = {k: np.ascontiguousarray(v.transpose(to_batch[k])) if k in to_batch else v
                 for k, v in feeds.items()}
        out_perm = {"Y": (2, 0, 1, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
        results = [np.ascontiguousarray(r.transpose(out_perm[n])) for r, n in zip(results, names)]
    model = build(layout)
    write_case("node", name, model.SerializeToString(),
               [feeds[n] for n, _ in graph_inputs], results)


ONNX_ACTIVATIONS = {
    # name: (alpha, beta) given explicitly
    "Relu": None, "Tanh": None, "Sigmoid": None, "Softsign": None, "Softplus": None,
    "Affine": (0.7, 0.2), "LeakyRelu": (0.05, None), "ThresholdedRelu": (0.3, None),
    "ScaledTanh": (1.3, 0.6), "HardSigmoid": (0.3, 0.45), "Elu": (0.8, None),
}


def node_cases():
    node_case("LstmForwardMatchesOnnxruntime", "LSTM")
    node_case("LstmReverseMatchesOnnxruntime", "LSTM", direction="reverse")
    node_case("LstmBidirectionalMatchesOnnxruntime", "LSTM", direction="bidirectional")
    node_case("LstmWithoutBiasMatchesOnnxruntime", "LSTM", bias=False)
    node_case("LstmPeepholesMatchOnnxruntime", "LSTM", direction="bidirectional",
              peepholes=True, init_h=True, init_c=True)
    node_case("LstmClipMatchesOnnxruntime", "LSTM", clip=0.4)
    node_case("LstmInputForgetMatchesOnnxruntime", "LSTM", input_forget=1)
    node_case("LstmMixedSequenceLensZeroPastEnd", "LSTM", direction="bidirectional",
              seq_lens=[5, 2, 4])
    node_case("LstmInitialStatesMatchOnnxruntime", "LSTM", init_h=True, init_c=True)
    node_case("LstmInitialHOnlyMatchesOnnxruntime", "LSTM", init_h=True)
    node_case("LstmInitialCOnlyMatchesOnnxruntime", "LSTM", init_c=True)
    node_case("LstmLayout1MatchesOnnxruntime", "LSTM", direction="bidirectional", layout=1,
              seq_lens=[3, 5, 1], init_h=True, init_c=True, peepholes=True)
    node_case("LstmOnlyYhMatchesOnnxruntime", "LSTM", outputs=("Y_h",))
    node_case("LstmActivationsWithAlphaBetaMatchOnnxruntime", "LSTM", direction="bidirectional",
              activations=["HardSigmoid", "LeakyRelu", "ScaledTanh",
                           "Sigmoid", "Affine", "Elu"],
              activation_alpha=[0.25, 0.1, 1.2, 0.6, 0.9],
              activation_beta=[0.55, 0.7, 0.05])
    node_case("LstmActivationDefaultsMatchOnnxruntime", "LSTM",
              activations=["HardSigmoid", "Elu", "LeakyRelu"])
    node_case("LstmOpset7MatchesOnnxruntime", "LSTM", direction="bidirectional", opset=7)
    node_case("GruLinearBeforeReset0MatchesOnnxruntime", "GRU", direction="bidirectional",
              linear_before_reset=0)
    node_case("GruLinearBeforeReset1MatchesOnnxruntime", "GRU", direction="bidirectional",
              linear_before_reset=1)
    node_case("GruReverseMatchesOnnxruntime", "GRU", direction="reverse", linear_before_reset=1)
    node_case("GruMixedSequenceLensZeroPastEnd", "GRU", direction="bidirectional",
              seq_lens=[2, 5, 3], linear_before_reset=1)
    node_case("GruInitialHMatchesOnnxruntime", "GRU", init_h=True)
    node_case("GruClipMatchesOnnxruntime", "GRU", clip=0.3, linear_before_reset=1)
    node_case("GruLayout1MatchesOnnxruntime", "GRU", direction="bidirectional", layout=1,
              seq_lens=[4, 1, 5], init_h=True, linear_before_reset=1)
    node_case("GruActivationsWithAlphaBetaMatchOnnxruntime", "GRU", direction="bidirectional",
              activations=["HardSigmoid", "Softsign", "Sigmoid", "ScaledTanh"],
              activation_alpha=[0.3, 0.9], activation_beta=[0.4, 1.1])
    node_case("RnnBidirectionalMixedSequenceLensZeroPastEnd", "RNN", direction="bidirectional",
              seq_lens=[1, 5, 3], init_h=True)
    node_case("RnnLayout1MatchesOnnxruntime", "RNN", layout=1, init_h=True)
    node_case("RnnClipMatchesOnnxruntime", "RNN", clip=0.5)
    for act, ab in ONNX_ACTIVATIONS.items():
        kw = {"activations": [act, act]}
        if ab:
            kw["activation_alpha"] = [ab[0], ab[0] * 0.5]
            if ab[1] is not None:
                kw["activation_beta"] = [ab[1], ab[1] * 2]
        node_case(f"Rnn{act}ActivationMatchesOnnxruntime", "RNN", direction="bidirectional",
                  **kw)


# ----------------------------------------------------------------------------------------------
# The generic ops around recurrent layers, one small graph each, onnxruntime as the reference.
# Data operands are graph inputs (so the ops run per request); shape-like operands are
# initializers, as exporters write them.


def op_case(name, op, data, consts=(), opset=17, n_outputs=1, **attrs):
    """data: list of (name, array) graph inputs; consts: list of (name, array) initializers;
    the node reads them in the order data + consts unless `order` is given."""
    order = attrs.pop("order", None)
    names = order or [n for n, _ in data] + [n for n, _ in consts]
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, name=name.lower(), **attrs)

    def info(n, a):
        t = TensorProto.FLOAT if a.dtype == np.float32 else TensorProto.INT64
        return helper.make_tensor_value_info(n, t, list(a.shape))

    g = helper.make_graph([node], name, [info(n, a) for n, a in data],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in outs],
                          [numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="make_onnx_fixtures")
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    results = sess.run(None, {n: a for n, a in data})
    write_case("ops", name, m.SerializeToString(), [a for _, a in data],
               [r.astype(np.float32) if r.dtype != np.int64 else r for r in results])


def i64(*v):
    return np.array(v, np.int64)


def op_cases():
    x = rand(2, 3, 4, scale=1.0)
    op_case("SliceNegativeStepsMatchOnnxruntime", "Slice", [("x", x)],
            [("starts", i64(-1, 3)), ("ends", i64(-100, 0)), ("axes", i64(1, 2)),
             ("steps", i64(-1, -2))])
    op_case("SliceClampsOutOfRangeBoundsMatchOnnxruntime", "Slice", [("x", x)],
            [("starts", i64(1, -7)), ("ends", i64(99, 2)), ("axes", i64(-2, 2))])
    op_case("GatherNegativeIndicesMatchOnnxruntime", "Gather", [("x", x)],
            [("idx", i64(-1, 0, 2))], axis=1)
    op_case("TransposePermutationMatchesOnnxruntime", "Transpose", [("x", x)], perm=[2, 0, 1])
    op_case("ExpandBroadcastsMatchOnnxruntime", "Expand", [("x", rand(3, 1, scale=1.0))],
            [("shape", i64(2, 1, 4))])
    op_case("ReshapeCopiesZeroAndInfersMinusOneMatchOnnxruntime", "Reshape", [("x", x)],
            [("shape", i64(0, -1, 2))])
    op_case("SplitSizesMatchOnnxruntime", "Split", [("x", x)], [("split", i64(1, 3))],
            axis=2, n_outputs=2)
    op_case("SplitEqualPartsOpset11MatchOnnxruntime", "Split", [("x", rand(2, 6, scale=1.0))],
            axis=1, n_outputs=3, opset=11)
    op_case("ConcatNegativeAxisMatchesOnnxruntime", "Concat",
            [("a", x), ("b", rand(2, 3, 2, scale=1.0))], axis=-1)
    op_case("SqueezeOpset11AxesAttributeMatchesOnnxruntime", "Squeeze",
            [("x", rand(2, 1, 3, 1, scale=1.0))], axes=[1, 3], opset=11)
    op_case("UnsqueezeOpset13AxesInputMatchesOnnxruntime", "Unsqueeze", [("x", x)],
            [("axes", i64(0, -1))])
    op_case("FlattenAxis2MatchesOnnxruntime", "Flatten", [("x", x)], axis=2)
    op_case("AddBroadcastsMatchOnnxruntime", "Add", [("a", x), ("b", rand(3, 1, scale=1.0))])
    op_case("SubBroadcastsMatchOnnxruntime", "Sub", [("a", rand(4, scale=1.0)), ("b", x)])
    op_case("MulWithConstantMatchesOnnxruntime", "Mul", [("a", x)], [("b", rand(4))])
    op_case("DivMatchesOnnxruntime", "Div", [("a", x)], [("b", rand(3, 1) + 2.0)])
    op_case("PowMatchesOnnxruntime", "Pow", [("a", np.abs(x) + 0.1)], [("b", rand(4))])
    op_case("MaxVariadicMatchesOnnxruntime", "Max",
            [("a", x), ("b", rand(4, scale=1.0)), ("c", rand(3, 4, scale=1.0))])
    op_case("ClipOpset13MatchesOnnxruntime", "Clip", [("x", x)],
            [("lo", np.array(-0.3, np.float32)), ("hi", np.array(0.5, np.float32))])
    op_case("MatMulBatchedBroadcastMatchesOnnxruntime", "MatMul",
            [("a", x), ("b", rand(4, 5, scale=1.0))])
    op_case("MatMulRuntimeOperandsMatchOnnxruntime", "MatMul",
            [("a", rand(2, 1, 3, 4, scale=1.0)), ("b", rand(3, 4, 2, scale=1.0))])
    op_case("MatMulVectorMatchesOnnxruntime", "MatMul",
            [("a", rand(4, scale=1.0)), ("b", rand(2, 4, 3, scale=1.0))])
    op_case("GemmTransposedWeightAsDenseMatchesOnnxruntime", "Gemm", [("a", rand(3, 4))],
            [("w", rand(5, 4)), ("c", rand(5))], transB=1, alpha=0.7, beta=1.3)
    op_case("GemmTransposedInputMatchesOnnxruntime", "Gemm", [("a", rand(4, 3))],
            [("w", rand(4, 5)), ("c", rand(3, 5))], transA=1, alpha=1.1, beta=0.5)
    op_case("SoftmaxOpset11FlattensAtAxisMatchesOnnxruntime", "Softmax", [("x", x)], axis=1,
            opset=11)
    op_case("SoftmaxMiddleAxisMatchesOnnxruntime", "Softmax", [("x", x)], axis=1)
    op_case("LogSoftmaxMatchesOnnxruntime", "LogSoftmax", [("x", x)])
    op_case("ReduceMeanKeepDimsMatchesOnnxruntime", "ReduceMean", [("x", x)], axes=[1],
            keepdims=1, opset=17)
    op_case("ReduceSumAxesInputMatchesOnnxruntime", "ReduceSum", [("x", x)],
            [("axes", i64(0, 2))], keepdims=0)
    op_case("ReduceMaxOpset18AxesInputMatchesOnnxruntime", "ReduceMax", [("x", x)],
            [("axes", i64(-1))], keepdims=0, opset=18)
    for act, attrs in [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("Softsign", {}),
                       ("Softplus", {}), ("LeakyRelu", {"alpha": 0.2}),
                       ("ThresholdedRelu", {"alpha": 0.4}), ("Elu", {"alpha": 0.6}),
                       ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Neg", {}), ("Abs", {}),
                       ("Exp", {})]:
        op_case(f"{act}MatchesOnnxruntime", act, [("x", x)], **attrs)
    op_case("GeluMatchesOnnxruntime", "Gelu", [("x", x)], opset=20)
    op_case("SqrtMatchesOnnxruntime", "Sqrt", [("x", np.abs(x) + 0.5)])
    op_case("LogMatchesOnnxruntime", "Log", [("x", np.abs(x) + 0.5)])
    op_case("ReciprocalMatchesOnnxruntime", "Reciprocal", [("x", np.abs(x) + 0.5)])


# ----------------------------------------------------------------------------------------------
# torch.onnx.export, PyTorch as the reference.


def torch_cases():
    import torch
    from torch import nn

    torch.manual_seed(20261121)

    class Seq(nn.Module):
        """A recurrent layer with a head: what users export."""

        def __init__(self, rnn, head, last_step=False, softmax=None, states=False):
            super().__init__()
            self.rnn, self.head = rnn, head
            self.last_step, self.softmax, self.states = last_step, softmax, states

        def forward(self, x, *init):
            if len(init) == 2:
                y, state = self.rnn(x, (init[0], init[1]))
            elif init:
                y, state = self.rnn(x, init[0])
            else:
                y, state = self.rnn(x)
            if self.last_step:
                y = y[:, -1] if self.rnn.batch_first else y[-1]
            y = self.head(y)
            if self.softmax == "softmax":
                y = torch.softmax(y, dim=-1)
            elif self.softmax == "log_softmax":
                y = torch.log_softmax(y, dim=-1)
            if self.states:
                return (y,) + (tuple(state) if isinstance(state, tuple) else (state,))
            return y

    def export(name, module, opset, batch_first, init_states=0, n_outputs=1,
               export_bt=(2, 4), run_bt=(3, 7), dynamo=False):
        module = module.eval()
        for p in module.parameters():  # random, never constant
            nn.init.normal_(p, std=0.4)

        def make_inputs(b, t, dtype):
            g = torch.Generator().manual_seed(b * 100 + t)
            x = torch.randn((b, t, I) if batch_first else (t, b, I), generator=g, dtype=dtype)
            D = 2 if module.rnn.bidirectional else 1
            L = module.rnn.num_layers
            init = tuple(torch.randn(D * L, b, module.rnn.hidden_size, generator=g, dtype=dtype)
                         for _ in range(init_states))
            return (x,) + init

        names = ["x"] + ["h0", "c0"][:init_states]
        out_names = [f"y{k}" for k in range(n_outputs)]
        dyn = {"x": {0: "batch", 1: "time"} if batch_first else {0: "time", 1: "batch"}}
        for n in names[1:]:
            dyn[n] = {1: "batch"}
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if dynamo:
                # The torch.export-based exporter (the default since PyTorch 2.9).
                batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
                shapes = [{0: batch, 1: time} if batch_first else {0: time, 1: batch}]
                if init_states:  # forward(x, *init): the states arrive as one tuple
                    shapes.append(tuple({1: batch} for _ in range(init_states)))
                program = torch.onnx.export(module, make_inputs(*export_bt, torch.float32),
                                            dynamo=True, opset_version=opset,
                                            input_names=names, output_names=out_names,
                                            dynamic_shapes=tuple(shapes), verbose=False)
                f.write(program.model_proto.SerializeToString())
            else:
                torch.onnx.export(module, make_inputs(*export_bt, torch.float32), f,
                                  opset_version=opset, dynamo=False, input_names=names,
                                  output_names=out_names, dynamic_axes=dyn)
        inputs32 = make_inputs(*run_bt, torch.float32)
        with torch.no_grad():
            ref = module.double()(*[t.double() for t in inputs32])
        module.float()
        ref = ref if isinstance(ref, tuple) else (ref,)
        # onnxruntime must agree with PyTorch on the exported file (a check of the export).
        sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, inputs32)})
        for g_, r in zip(got, ref):
            np.testing.assert_allclose(g_, r.numpy(), rtol=1e-4, atol=1e-5)
        write_case("torch", name, f.getvalue(), [t.numpy() for t in inputs32],
                   [r.numpy() for r in ref])

    export("TorchLstmTimeMajorLinearOpset14",
           Seq(nn.LSTM(I, H), nn.Linear(H, 3)), 14, batch_first=False)
    export("TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17",
           Seq(nn.LSTM(I, H, num_layers=2, batch_first=True, bidirectional=True),
               nn.Linear(2 * H, 5), softmax="softmax"), 17, batch_first=True)
    export("TorchLstmLastStepLinearOpset20",
           Seq(nn.LSTM(I, H, batch_first=True), nn.Linear(H, 2), last_step=True), 20,
           batch_first=True)
    export("TorchLstmInitialStatesReturnsStatesOpset16",
           Seq(nn.LSTM(I, H, num_layers=2, batch_first=True), nn.Linear(H, 3), states=True),
           16, batch_first=True, init_states=2, n_outputs=3)
    export("TorchGruBidirectionalLastStepOpset15",
           Seq(nn.GRU(I, H, batch_first=True, bidirectional=True), nn.Linear(2 * H, 4),
               last_step=True), 15, batch_first=True)
    export("TorchGruStackedLogSoftmaxOpset18",
           Seq(nn.GRU(I, H, num_layers=2), nn.Linear(H, 3), softmax="log_softmax"), 18,
           batch_first=False)
    export("TorchGruInitialStateReturnsStateOpset19",
           Seq(nn.GRU(I, H, batch_first=True, bidirectional=True), nn.Linear(2 * H, 2),
               states=True), 19, batch_first=True, init_states=1, n_outputs=2)
    export("TorchRnnTanhStackedBidirectionalOpset14",
           Seq(nn.RNN(I, H, num_layers=2, bidirectional=True, batch_first=True),
               nn.Linear(2 * H, 3)), 14, batch_first=True)
    export("TorchDynamoLstmBatchFirstBidirectionalStackedOpset18",
           Seq(nn.LSTM(I, H, num_layers=2, batch_first=True, bidirectional=True),
               nn.Linear(2 * H, 3)), 18, batch_first=True, dynamo=True)
    export("TorchDynamoGruInitialStateReturnsStateOpset20",
           Seq(nn.GRU(I, H, batch_first=True), nn.Linear(H, 2), softmax="softmax",
               states=True), 20, batch_first=True, init_states=1, n_outputs=2, dynamo=True)
    # The torch.export-based exporter unrolls nn.RNN into per-step MatMul/Add/Tanh: the file
    # fixes the number of steps (the batch stays dynamic).
    export("TorchDynamoRnnUnrolledFixedLengthOpset18",
           Seq(nn.RNN(I, H), nn.Linear(H, 2)), 18, batch_first=False, dynamo=True,
           run_bt=(3, 4))
    export("TorchRnnReluOpset17",
           Seq(nn.RNN(I, H, nonlinearity="relu"), nn.Linear(H, 2), softmax="softmax"), 17,
           batch_first=False)


def wide_node_cases():
    """Widths of the GPU engine's persistent register kernel (engine/cuda/fused_rnn.h), which
    runs GRU linear_before_reset=0 (Keras's reset_after=False) there: batches of up to 8 of mixed
    sequence_lens; and a batch of 24, which the batch-tiled persistent kernel runs. Their own random numbers, so the cases above stay as they are."""
    rng = np.random.default_rng(20261126)
    # Weights of PyTorch's initial scale (1/sqrt(H)): at 0.5 the 256-wide recurrence is chaotic
    # and amplifies the last-bit differences of any two correct FP32 implementations.
    node_case("GruLinearBeforeReset0H256MatchesOnnxruntime", "GRU", linear_before_reset=0,
              dims=(12, 5, 32, 256), seq_lens=[12, 7, 1, 12, 4], init_h=True, rng=rng,
              wscale=1 / 16)
    # Past the register kernel's 8 sequences: the batch-tiled persistent kernel.
    node_case("GruLinearBeforeReset0H128B24MatchesOnnxruntime", "GRU", linear_before_reset=0,
              dims=(10, 24, 16, 128),
              seq_lens=[10, 3, 7, 1, 10, 5, 9, 2, 8, 10, 4, 6, 10, 1, 7, 9, 3, 10, 5, 8, 2, 6,
                        10, 4],
              init_h=True, rng=rng, wscale=1 / 12)
    # Up to 64 units: the one-block persistent register kernel (48 of its 64 lanes' units),
    # which runs any batch size in blocks of up to 8 sequences: 8 of them, then 24 GRU and 20
    # LSTM sequences (initial states, mixed lengths).
    node_case("GruLinearBeforeReset0H48B8MatchesOnnxruntime", "GRU", linear_before_reset=0,
              dims=(14, 8, 20, 48), seq_lens=[14, 5, 1, 14, 9, 3, 12, 7], init_h=True, rng=rng,
              wscale=1 / 7)
    node_case("GruLinearBeforeReset0H40B24MatchesOnnxruntime", "GRU", linear_before_reset=0,
              dims=(9, 24, 12, 40),
              seq_lens=[9, 2, 7, 1, 9, 5, 8, 3, 9, 6, 4, 9, 1, 7, 9, 2, 5, 9, 8, 3, 6, 9, 4, 7],
              init_h=True, rng=rng, wscale=1 / 6)
    node_case("LstmH56B20MatchesOnnxruntime", "LSTM",
              dims=(11, 20, 10, 56),
              seq_lens=[11, 3, 8, 1, 11, 6, 9, 2, 11, 5, 7, 11, 4, 10, 1, 11, 8, 3, 6, 11],
              init_h=True, init_c=True, rng=rng, wscale=1 / 7)
    # Both directions of a GRU linear_before_reset=0 in one launch of the batch-tiled kernel
    # (each direction on half of the SMs): 20 sequences of mixed lengths, initial states.
    node_case("GruLinearBeforeReset0BidirH128B20MatchesOnnxruntime", "GRU",
              direction="bidirectional", linear_before_reset=0, dims=(8, 20, 16, 128),
              seq_lens=[8, 3, 6, 1, 8, 5, 7, 2, 8, 4, 6, 8, 1, 7, 3, 8, 5, 2, 8, 6],
              init_h=True, rng=rng, wscale=1 / 12)


def main():
    with_torch = "--no-torch" not in sys.argv
    for family in ("node", "ops") + (("torch",) if with_torch else ()):
        shutil.rmtree(os.path.join(OUT, family), ignore_errors=True)
    node_cases()
    op_cases()
    if with_torch:
        torch_cases()
    wide_node_cases()


if __name__ == "__main__":
    main()
