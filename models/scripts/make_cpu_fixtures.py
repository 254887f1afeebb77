#!/usr/bin/env python3
"""Makes the CPU engine's conformance fixtures with the real frameworks.

Every case is one .npz under tests/fixtures/cpu/<case>.npz holding:
  - the weights, already converted to the engine's canonical layout (per direction d:
    W{d} [G*H, I], R{d} [G*H, H'], bW{d}, bR{d} [G*H], optional P{d} [proj, H] and
    peep{d} [3H] in the order i, f, o; gate order LSTM i,f,g,o / GRU r,z,n), or a layer's
    parameters in the IR's layout;
  - the inputs (x, lengths, optional initial states h0/c0 stacked per direction, step masks);
  - the framework's outputs (y, and hN/cN stacked per direction where the case has them).
The case names match the C++ tests in tests/unit/cpu_*_test.cc, which build the IR directly
and compare at 1e-5 relative.

References: PyTorch (nn.LSTM/GRU/RNN with packed sequences, float64), Keras 2 (tf_keras,
float64), Keras 3 (float64) and onnxruntime (float32: its RNN kernels have no float64).
Weights are random, never constant: constant weights hide gate-order mistakes.

Usage: python3 models/scripts/make_cpu_fixtures.py [--only SUBSTRING]
Needs: numpy, torch, tensorflow (tf_keras, keras), onnx, onnxruntime.
"""
import argparse
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                   "cpu")
RNG = np.random.default_rng(20261121)


def rnd(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float64)


def save(name, **arrays):
    path = os.path.join(OUT, name + ".npz")
    np.savez_compressed(path, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    print(f"{name}: " + ", ".join(f"{k}{list(np.shape(v))}" for k, v in arrays.items()))


# ----------------------------------------------------------------------------------------
# PyTorch: ONNX-style semantics (packed sequences: zeros past each length).
# PyTorch's own gate order is the canonical one (LSTM i,f,g,o; GRU r,z,n).
# ----------------------------------------------------------------------------------------
def torch_cases():
    import torch
    torch.manual_seed(7)

    def run(module, x, lengths, h0=None):
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            torch.from_numpy(x), torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        out, state = module(packed, h0) if h0 is not None else module(packed)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                      total_length=x.shape[1])
        return y.detach().numpy(), state

    def weights(module, dirs, proj=False):
        out = {}
        for d in range(dirs):
            sfx = "_reverse" if d == 1 else ""
            g = lambda n: getattr(module, n + sfx).detach().numpy()
            out[f"W{d}"] = g("weight_ih_l0")
            out[f"R{d}"] = g("weight_hh_l0")
            out[f"bW{d}"] = g("bias_ih_l0")
            out[f"bR{d}"] = g("bias_hh_l0")
            if proj:
                out[f"P{d}"] = g("weight_hr_l0")
        return out

    def randomize(module):
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.from_numpy(rnd(*p.shape)))

    B, T, I, H = 4, 6, 5, 7
    lengths = np.array([6, 3, 1, 4], dtype=np.int64)

    for cell, name in [("lstm", "TorchLstm"), ("gru", "TorchGru"), ("rnn_tanh", "TorchRnnTanh"),
                       ("rnn_relu", "TorchRnnRelu")]:
        for dirs in (1, 2):
            for proj in ((0, 3) if cell == "lstm" else (0,)):
                kw = dict(input_size=I, hidden_size=H, batch_first=True, bidirectional=dirs == 2,
                          dtype=torch.float64)
                if cell == "lstm":
                    m = torch.nn.LSTM(proj_size=proj, **kw)
                elif cell == "gru":
                    m = torch.nn.GRU(**kw)
                else:
                    m = torch.nn.RNN(nonlinearity=cell[4:], **kw)
                randomize(m)
                hp = proj or H
                x = rnd(B, T, I, scale=1.0)
                h0 = rnd(dirs, B, hp)
                init = h0
                if cell == "lstm":
                    c0 = rnd(dirs, B, H)
                    init = (torch.from_numpy(h0), torch.from_numpy(c0))
                else:
                    init = torch.from_numpy(h0)
                y, state = run(m, x, lengths, init)
                arrays = dict(x=x, lengths=lengths, h0=h0, y=y, **weights(m, dirs, proj > 0))
                if cell == "lstm":
                    arrays.update(c0=c0, hN=state[0].detach().numpy(),
                                  cN=state[1].detach().numpy())
                else:
                    arrays.update(hN=state.detach().numpy())
                case = name + ("Bidirectional" if dirs == 2 else "") + ("Proj" if proj else "")
                save(case, **arrays)

    # Sizes that exercise the per-thread unit split (slices of 16 and a ragged remainder).
    Bt, Tt, It, Ht = 5, 9, 24, 40
    for cell, name in [("lstm", "TorchLstmWide"), ("gru", "TorchGruWide")]:
        cls = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        m = cls(input_size=It, hidden_size=Ht, batch_first=True, dtype=torch.float64)
        randomize(m)
        x = rnd(Bt, Tt, It, scale=1.0)
        lens = np.array([9, 9, 2, 7, 5], dtype=np.int64)
        y, state = run(m, x, lens)
        arrays = dict(x=x, lengths=lens, y=y, **weights(m, 1))
        arrays["hN"] = (state[0] if cell == "lstm" else state).detach().numpy()
        save(name, **arrays)


# ----------------------------------------------------------------------------------------
# Keras 2 (tf_keras) and Keras 3: Keras masking semantics.
# Keras kernels are [I, G*H] with gate columns LSTM i,f,c,o (= canonical i,f,g,o) and
# GRU z,r,h (canonical r,z,n: swap the first two blocks). GRU reset_after=True keeps a
# (2, 3H) bias: input row, recurrent row.
# ----------------------------------------------------------------------------------------
def keras_to_canonical(cell, weights, H):
    if cell == "gru":
        perm = lambda a: np.concatenate([a[..., H:2 * H], a[..., :H], a[..., 2 * H:]], axis=-1)
    else:
        perm = lambda a: a
    kernel, rec, bias = weights
    W, R = perm(kernel).T, perm(rec).T
    if bias.ndim == 2:
        bW, bR = perm(bias[0]), perm(bias[1])
    else:
        bW, bR = perm(bias), np.zeros_like(bias)
    return W, R, bW, bR


def masked_input(B, T, F, lengths, interior=()):
    x = rnd(B, T, F, scale=1.0)
    for b, n in enumerate(lengths):
        x[b, n:] = 0.0
    for b, t in interior:
        x[b, t] = 0.0
    return x


def keras2_cases():
    import tf_keras as K
    K.backend.set_floatx("float64")
    B, T, I, H = 4, 6, 5, 7
    lengths = [6, 3, 1, 4]
    x = masked_input(B, T, I, lengths)
    # Masked steps inside sequences 0 and 3 (and a leading one in sequence 2's row 0 position).
    xi = masked_input(B, T, I, lengths, interior=[(0, 2), (0, 3), (3, 0), (1, 1)])

    def layer_of(cell, **kw):
        if cell == "lstm":
            return K.layers.LSTM(H, **kw)
        if cell == "gru":
            return K.layers.GRU(H, **kw)
        return K.layers.SimpleRNN(H, **kw)

    def randomize(layer):
        layer.set_weights([rnd(*w.shape) for w in layer.get_weights()])

    def build(rnn, inp_shape):
        inp = K.Input(shape=inp_shape, dtype="float64")
        out = rnn(K.layers.Masking(0.0)(inp))
        return K.Model(inp, out)

    def pack(cell, layers):
        out = {}
        for d, l in enumerate(layers):
            W, R, bW, bR = keras_to_canonical(cell, l.get_weights(), H)
            out.update({f"W{d}": W, f"R{d}": R, f"bW{d}": bW, f"bR{d}": bR})
        return out

    def outputs(result, dirs, lstm):
        result = result if isinstance(result, list) else [result]
        out = {"y": result[0]}
        if len(result) > 1:
            st = result[1:]
            per = 2 if lstm else 1
            out["hN"] = np.stack([st[d * per] for d in range(dirs)])
            if lstm:
                out["cN"] = np.stack([st[d * per + 1] for d in range(dirs)])
        return out

    cases = [
        # name, cell, options, data
        ("KerasLstmMaskedRepeatsLastOutput", "lstm", dict(), x),
        ("KerasLstmGoBackwardsOutputsInProcessingOrder", "lstm", dict(go_backwards=True), x),
        ("KerasGruResetAfterFalse", "gru", dict(reset_after=False), x),
        ("KerasGruResetAfterTrue", "gru", dict(reset_after=True), x),
        ("KerasSimpleRnn", "rnn", dict(), x),
        ("KerasLstmHardSigmoidKeras2", "lstm", dict(recurrent_activation="hard_sigmoid"), x),
        ("KerasLstmReluActivation", "lstm", dict(activation="relu"), x),
        ("KerasLstmInteriorMaskKeepsState", "lstm", dict(), xi),
        ("KerasGruInteriorMaskKeepsState", "gru", dict(reset_after=False), xi),
        ("KerasLstmGoBackwardsInteriorMask", "lstm", dict(go_backwards=True), xi),
    ]
    for name, cell, opts, data in cases:
        rnn = layer_of(cell, return_sequences=True, return_state=True, **opts)
        model = build(rnn, (T, I))
        randomize(rnn)
        res = model.predict(data, verbose=0)
        save(name, x=data, **pack(cell, [rnn]), **outputs(res, 1, cell == "lstm"))

    for merge in ["concat", "sum", "mul", "ave", None]:
        for cell in ("lstm", "gru"):
            for seqs in (True, False):
                rnn = layer_of(cell, return_sequences=seqs)
                bi = K.layers.Bidirectional(rnn, merge_mode=merge)
                model = build(bi, (T, I))
                randomize(bi)
                res = model.predict(xi if cell == "gru" and seqs else x, verbose=0)
                res = res if isinstance(res, list) else [res]
                mname = (merge or "none").capitalize()
                name = f"KerasBidirectional{cell.capitalize()}{mname}" + (
                    "Sequences" if seqs else "Last")
                arrays = dict(x=xi if cell == "gru" and seqs else x,
                              **pack(cell, [bi.forward_layer, bi.backward_layer]))
                arrays["y"] = res[0]
                if len(res) > 1:
                    arrays["y2"] = res[1]
                save(name, **arrays)

    # Two masked inputs merged: the merged mask is the AND (the shorter length).
    a = masked_input(B, T, 3, [6, 2, 5, 4])
    b = masked_input(B, T, 2, [4, 5, 6, 1])
    ia, ib = K.Input((T, 3), dtype="float64"), K.Input((T, 2), dtype="float64")
    cat = K.layers.Concatenate()([K.layers.Masking(0.0)(ia), K.layers.Masking(0.0)(ib)])
    lstm = K.layers.LSTM(H)
    model = K.Model([ia, ib], lstm(cat))
    randomize(lstm)
    W, R, bW, bR = keras_to_canonical("lstm", lstm.get_weights(), H)
    save("KerasMergeMaskIsAnd", a=a, b=b, W0=W, R0=R, bW0=bW, bR0=bR,
         y=model.predict([a, b], verbose=0))


def keras3_cases():
    import keras
    keras.config.set_floatx("float64")
    B, T, I, H = 4, 6, 5, 7
    x = masked_input(B, T, I, [6, 3, 1, 4])
    inp = keras.Input((T, I), dtype="float64")
    lstm = keras.layers.LSTM(H, recurrent_activation="hard_sigmoid", return_sequences=True)
    model = keras.Model(inp, lstm(keras.layers.Masking(0.0)(inp)))
    lstm.set_weights([rnd(*w.shape) for w in lstm.get_weights()])
    W, R, bW, bR = keras_to_canonical("lstm", lstm.get_weights(), H)
    save("Keras3LstmHardSigmoid", x=x, W0=W, R0=R, bW0=bW, bR0=bR,
         y=model.predict(x, verbose=0))
    layer_cases(keras)


def layer_cases(keras):
    """The layers around RNNs, against Keras 3 (float64)."""
    L = keras.layers
    B, T, C = 3, 9, 4

    def run(layer, *inputs):
        ins = [keras.Input(i.shape[1:], dtype="float64") for i in inputs]
        model = keras.Model(ins, layer(ins if len(ins) > 1 else ins[0]))
        return model.predict(list(inputs) if len(inputs) > 1 else inputs[0], verbose=0)

    x = rnd(B, T, C, scale=1.0)
    save("SoftmaxOverTimeAxis", x=x, y=run(L.Softmax(axis=1), x))
    save("SoftmaxOverLastAxis", x=x, y=run(L.Softmax(axis=-1), x))

    bn = L.BatchNormalization(epsilon=1e-3)
    bn.build((None, T, C))
    gamma, beta, mean = rnd(C), rnd(C), rnd(C)
    var = np.abs(rnd(C)) + 0.1
    bn.set_weights([gamma, beta, mean, var])
    save("BatchNormInference", x=x, gamma=gamma, beta=beta, mean=mean, var=var,
         y=run(bn, x))

    ln = L.LayerNormalization(epsilon=1e-3)
    ln.build((None, T, C))
    lg, lb = rnd(C), rnd(C)
    ln.set_weights([lg, lb])
    save("LayerNormLastAxis", x=x + 3.0, gamma=lg, beta=lb, y=run(ln, x + 3.0))

    Co = 5
    for pad, k, s, d in [("valid", 3, 1, 1), ("valid", 3, 2, 1), ("same", 4, 1, 1),
                         ("same", 3, 2, 1), ("same", 3, 1, 2), ("causal", 3, 1, 1),
                         ("causal", 2, 1, 3), ("causal", 3, 2, 1)]:
        conv = L.Conv1D(Co, k, strides=s, padding=pad, dilation_rate=d, activation="tanh")
        conv.build((None, T, C))
        kern, bias = rnd(k, C, Co), rnd(Co)
        conv.set_weights([kern, bias])
        save(f"Conv1D_{pad}_k{k}_s{s}_d{d}", x=x, kernel=kern, bias=bias, y=run(conv, x))

    for kind, cls in [("max", L.MaxPooling1D), ("avg", L.AveragePooling1D)]:
        for pad, p, s in [("valid", 2, 2), ("valid", 3, 2), ("same", 2, 2), ("same", 3, 2),
                          ("same", 4, 3), ("valid", 3, 1)]:
            save(f"Pool1D_{kind}_{pad}_p{p}_s{s}", x=x,
                 y=run(cls(pool_size=p, strides=s, padding=pad), x))

    xm = masked_input(B, T, C, [9, 4, 6])
    for kind, cls in [("max", L.GlobalMaxPooling1D), ("avg", L.GlobalAveragePooling1D)]:
        inp = keras.Input((T, C), dtype="float64")
        model = keras.Model(inp, cls()(L.Masking(0.0)(inp)))
        save(f"GlobalPool_{kind}_masked", x=xm, y=model.predict(xm, verbose=0))

    save("FlattenKeepsBatch", x=x, y=run(L.Flatten(), x))
    save("ReshapeWithFreeAxis", x=x, y=run(L.Reshape((3, -1)), x))
    v = rnd(B, C, scale=1.0)
    save("RepeatVectorTiles", x=v, y=run(L.RepeatVector(5), v))

    a, b, c = rnd(B, T, C, scale=1.0), rnd(B, T, C, scale=1.0), rnd(B, T, 2, scale=1.0)
    save("ConcatenateLastAxis", a=a, b=c, y=run(L.Concatenate(axis=-1), a, c))
    save("ConcatenateTimeAxis", a=a, b=b, y=run(L.Concatenate(axis=1), a, b))
    for kind, cls in [("Add", L.Add), ("Subtract", L.Subtract), ("Multiply", L.Multiply),
                      ("Average", L.Average), ("Maximum", L.Maximum), ("Minimum", L.Minimum)]:
        save(f"Merge{kind}", a=a, b=b, y=run(cls(), a, b))


# ----------------------------------------------------------------------------------------
# onnxruntime: ONNX's activation list with alpha/beta, clip, input_forget, peepholes,
# linear_before_reset, sequence_lens. ONNX orders: LSTM i,o,f,c (peepholes i,o,f); GRU z,r,h.
# ----------------------------------------------------------------------------------------
def onnx_cases():
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    B, T, I, H = 4, 6, 5, 7
    lengths = np.array([6, 3, 1, 4], dtype=np.int32)

    def blocks(a, order, H):
        return np.concatenate([a[..., i * H:(i + 1) * H] for i in order], axis=-1)

    def canonical(op, W, R, Bias, P=None):
        # ONNX -> canonical gate order.
        if op == "LSTM":
            to_canon = [0, 2, 3, 1]   # i,o,f,c -> i,f,c,o
        elif op == "GRU":
            to_canon = [1, 0, 2]      # z,r,h -> r,z,h
        else:
            to_canon = [0]
        out = {}
        G = len(to_canon)
        for d in range(W.shape[0]):
            out[f"W{d}"] = blocks(W[d].T, to_canon, H).T
            out[f"R{d}"] = blocks(R[d].T, to_canon, H).T
            out[f"bW{d}"] = blocks(Bias[d, :G * H], to_canon, H)
            out[f"bR{d}"] = blocks(Bias[d, G * H:], to_canon, H)
            if P is not None:
                out[f"peep{d}"] = blocks(P[d], [0, 2, 1], H)  # i,o,f -> i,f,o
        return out

    def run(name, op, dirs, attrs, peephole=False):
        G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
        direction = {1: "forward", 2: "bidirectional", -1: "reverse"}[dirs]
        nd = 2 if dirs == 2 else 1
        W = rnd(nd, G * H, I).astype(np.float32)
        R = rnd(nd, G * H, H).astype(np.float32)
        Bias = rnd(nd, 2 * G * H).astype(np.float32)
        P = rnd(nd, 3 * H).astype(np.float32) if peephole else None
        x = rnd(T, B, I, scale=1.0).astype(np.float32)  # ONNX layout [T, B, I]
        h0 = rnd(nd, B, H).astype(np.float32)
        c0 = rnd(nd, B, H).astype(np.float32)
        inputs = ["X", "W", "R", "B", "sequence_lens", "initial_h"]
        inits = [helper.make_tensor("W", TensorProto.FLOAT, W.shape, W.ravel()),
                 helper.make_tensor("R", TensorProto.FLOAT, R.shape, R.ravel()),
                 helper.make_tensor("B", TensorProto.FLOAT, Bias.shape, Bias.ravel())]
        if op == "LSTM":
            inputs += ["initial_c"]
            if peephole:
                inputs += ["P"]
                inits.append(helper.make_tensor("P", TensorProto.FLOAT, P.shape, P.ravel()))
        outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
        node = helper.make_node(op, inputs, outputs, hidden_size=H, direction=direction, **attrs)
        graph_inputs = [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I]),
            helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [B]),
            helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [nd, B, H])]
        if op == "LSTM":
            graph_inputs.append(helper.make_tensor_value_info("initial_c", TensorProto.FLOAT,
                                                              [nd, B, H]))
        graph = helper.make_graph(
            [node], name, graph_inputs,
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                                 ir_version=9)
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        feeds = {"X": x, "sequence_lens": lengths, "initial_h": h0}
        if op == "LSTM":
            feeds["initial_c"] = c0
        res = sess.run(None, feeds)
        # Y: [T, dirs, B, H] -> per direction [B, T, H], stacked [dirs, B, T, H].
        y = np.transpose(res[0], (1, 2, 0, 3))
        arrays = dict(x=np.transpose(x, (1, 0, 2)), lengths=lengths.astype(np.int64), h0=h0,
                      y=y, hN=res[1], **canonical(op, W, R, Bias, P))
        if op == "LSTM":
            arrays.update(c0=c0, cN=res[2])
        save(name, **arrays)

    acts = [("Relu", None, None), ("Sigmoid", None, None), ("Affine", 0.7, -0.2),
            ("LeakyRelu", 0.1, None), ("ThresholdedRelu", 0.3, None),
            ("ScaledTanh", 1.3, 0.6), ("HardSigmoid", 0.25, 0.4), ("Elu", 0.8, None),
            ("Softsign", None, None), ("Softplus", None, None)]
    for act, alpha, beta in acts:
        attrs = {"activations": [act]}
        if alpha is not None:
            attrs["activation_alpha"] = [alpha]
        if beta is not None:
            attrs["activation_beta"] = [beta]
        run(f"OnnxRnn{act}", "RNN", 1, attrs)
    run("OnnxLstmActivationsWithAlphaBeta", "LSTM", 1,
        {"activations": ["HardSigmoid", "ScaledTanh", "Softsign"],
         "activation_alpha": [0.3, 1.1], "activation_beta": [0.45, 0.9]})
    run("OnnxGruActivationsWithAlphaBeta", "GRU", 1,
        {"activations": ["HardSigmoid", "LeakyRelu"],
         "activation_alpha": [0.25, 0.2], "activation_beta": [0.5]})
    run("OnnxLstmPeepholesClipInputForget", "LSTM", 2,
        {"clip": 0.9, "input_forget": 1}, peephole=True)
    run("OnnxLstmPeepholesReverse", "LSTM", -1, {}, peephole=True)
    run("OnnxGruLinearBeforeResetFalse", "GRU", 2, {"linear_before_reset": 0})
    run("OnnxGruLinearBeforeResetTrueReverse", "GRU", -1, {"linear_before_reset": 1})
    run("OnnxGruClip", "GRU", 1, {"clip": 0.7})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="torch, keras2, keras3 or onnx")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    for name, fn in [("torch", torch_cases), ("keras2", keras2_cases), ("keras3", keras3_cases),
                     ("onnx", onnx_cases)]:
        if args.only and args.only != name:
            continue
        fn()


if __name__ == "__main__":
    sys.exit(main())
