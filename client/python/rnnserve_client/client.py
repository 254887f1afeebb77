"""rnnserve.v1 over gRPC with numpy arrays."""
import grpc
import numpy as np

# Messages and the stub from the descriptors compiled into the package (proto.py).
from . import proto as pb

# The gRPC metadata header that carries a call's sequence id, where a proxy in front of several
# replicas can hash it to keep a sequence on one replica; sent on every call naming a sequence.
SEQUENCE_ID_HEADER = "x-sequence-id"


class RnnServeError(RuntimeError):
    """A request the server refused: `code` is the grpc.StatusCode, the message says why."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code


def _to_tensor(array, integer):
    a = np.asarray(array)
    t = pb.Tensor(shape=list(a.shape))
    if integer:
        t.dtype = pb.TYPE_INT64
        t.raw_content = np.ascontiguousarray(a, dtype="<i8").tobytes()
    else:
        t.dtype = pb.TYPE_FP32
        t.raw_content = np.ascontiguousarray(a, dtype="<f4").tobytes()
    return t


def _to_array(t):
    shape = tuple(t.shape)
    if t.dtype in (pb.TYPE_INT64, pb.TYPE_INT32):
        if t.raw_content:
            dt = "<i8" if t.dtype == pb.TYPE_INT64 else "<i4"
            return np.frombuffer(t.raw_content, dtype=dt).reshape(shape)
        vals = list(t.int64_val) or list(t.int_val)
        return np.array(vals, dtype=np.int64).reshape(shape)
    if t.raw_content:
        return np.frombuffer(t.raw_content, dtype="<f4").reshape(shape)
    return np.array(t.float_val, dtype=np.float32).reshape(shape)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _token_of(token, token_file):
    if token_file:
        lines = [ln.strip() for ln in _read(token_file).decode().splitlines() if ln.strip()]
        if not lines:
            raise ValueError(f"token file {token_file} is empty")
        return lines[0]
    return token


class Client:
    """A connection to rnnserve.

    TLS: tls_ca (PEM file of the CA that signed the server's certificate; None with TLS on uses
    the system's roots), tls_cert and tls_key (PEM files of a client certificate, for mutual
    TLS). TLS is on when any of them is given. Tokens: token (the string) or token_file (its
    first non-blank line) is sent as `authorization: Bearer <token>` on every call.
    """

    def __init__(self, server="127.0.0.1:8500", timeout=30.0, max_message_bytes=64 << 20,
                 tls_ca=None, tls_cert=None, tls_key=None, token=None, token_file=None):
        opts = [("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes)]
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("tls_cert and tls_key go together")
        if tls_ca or tls_cert:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca) if tls_ca else None,
                private_key=_read(tls_key) if tls_key else None,
                certificate_chain=_read(tls_cert) if tls_cert else None)
            self._channel = grpc.secure_channel(server, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(server, options=opts)
        token = _token_of(token, token_file)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._stub = pb.RnnServeStub(self._channel)
        self._timeout = timeout
        self._meta = {}

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise RnnServeError(e.code(), e.details()) from None

    def metadata(self, model, version=0):
        spec = pb.ModelSpec(name=model, version=version)
        return self._call(self._stub.ModelMetadata, pb.ModelMetadataRequest(model_spec=spec))

    def list_models(self):
        return self._call(self._stub.ListModels, pb.ListModelsRequest()).models

    def load_model(self, name):
        """Loads (or reloads) a model of the server's repository; returns its status."""
        return self._call(self._stub.LoadModel, pb.LoadModelRequest(name=name)).status

    def unload_model(self, name):
        self._call(self._stub.UnloadModel, pb.UnloadModelRequest(name=name))

    def _inputs(self, model, inputs, version):
        meta = self._meta.get((model, version)) or self.metadata(model, version)
        self._meta[(model, version)] = meta
        if not isinstance(inputs, dict):
            if len(meta.inputs) != 1:
                raise ValueError(f"model {model!r} has {len(meta.inputs)} inputs: pass a dict")
            inputs = {meta.inputs[0].name: inputs}
        kinds = {i.name: i.dtype == pb.TYPE_INT64 for i in meta.inputs}
        for name in inputs:
            if name not in kinds:
                raise ValueError(f"model {model!r} has no input {name!r}; its inputs: "
                                 f"{', '.join(kinds)}")
        return {name: _to_tensor(a, kinds[name]) for name, a in inputs.items()}

    def predict(self, model, inputs, lengths=None, version=0):
        """inputs: an array (single-input models) or {name: array}. Returns {name: array}."""
        req = pb.PredictRequest(model_spec=pb.ModelSpec(name=model, version=version),
                                lengths=list(lengths or []))
        for name, t in self._inputs(model, inputs, version).items():
            req.inputs[name].CopyFrom(t)
        resp = self._call(self._stub.Predict, req)
        return {name: _to_array(t) for name, t in resp.outputs.items()}

    def evaluate(self, model, inputs, targets, sample_weight=None, loss="", metrics=(),
                 version=0):
        """Loss and metrics as Keras's model.evaluate(..., return_dict=True) gives them."""
        req = pb.EvaluateRequest(model_spec=pb.ModelSpec(name=model, version=version), loss=loss,
                                 metrics=list(metrics))
        for name, t in self._inputs(model, inputs, version).items():
            req.inputs[name].CopyFrom(t)
        targets = np.asarray(targets)
        req.targets["target"].CopyFrom(_to_tensor(targets, np.issubdtype(targets.dtype, np.integer)))
        if sample_weight is not None:
            req.sample_weight.CopyFrom(_to_tensor(sample_weight, False))
        resp = self._call(self._stub.Evaluate, req)
        out = {"loss": resp.loss}
        out.update(resp.metrics)
        return out

    def stream(self, model, chunks, sequence_id=1):
        """Sends the chunks ([1, T_i, F] arrays) of one sequence; yields each chunk's outputs."""
        chunks = list(chunks)
        meta = self.metadata(model)
        name = meta.inputs[0].name
        integer = meta.inputs[0].dtype == pb.TYPE_INT64

        def requests():
            for i, c in enumerate(chunks):
                r = pb.StreamPredictRequest(model_spec=pb.ModelSpec(name=model),
                                            sequence_id=sequence_id, start=i == 0,
                                            end=i == len(chunks) - 1)
                r.inputs[name].CopyFrom(_to_tensor(c, integer))
                yield r

        # The sequence id where a proxy can hash it (docs/scale-out.md).
        metadata = self._metadata + ((SEQUENCE_ID_HEADER, str(sequence_id)),)
        for resp in self._stub.StreamPredict(requests(), timeout=self._timeout,
                                             metadata=metadata):
            if resp.error_code:
                code = next(c for c in grpc.StatusCode if c.value[0] == resp.error_code)
                raise RnnServeError(code, resp.error_message)
            yield {n: _to_array(t) for n, t in resp.outputs.items()}

    def generate(self, model, prompt, max_tokens=100, temperature=0.0, top_k=0, top_p=0.0,
                 seed=0, stop=(), stop_ids=(), n=1, version=0, timeout=None):
        """Generates with a recurrent language model (rnnserve.v1 Generate), yielding each token
        as the server samples it: {"sample", "id", "text"}, then for each sample
        {"sample", "finish": "LENGTH" | "STOP" | "CANCELLED", "tokens"}. `prompt`: text (the
        model's vocab.json encodes it) or a list of token ids. temperature 0 is greedy; a seed
        gives the same tokens every time. Closing the generator cancels the generation."""
        req = pb.GenerateRequest(model_spec=pb.ModelSpec(name=model, version=version),
                                 max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                 top_p=top_p, seed=seed, stop_strings=list(stop),
                                 stop_ids=list(stop_ids), n=n)
        if isinstance(prompt, str):
            req.prompt_text = prompt
        else:
            req.prompt_ids.extend(int(i) for i in prompt)
        call = self._stub.Generate(req, timeout=timeout or self._timeout, metadata=self._metadata)
        reasons = {v: k[len("FINISH_REASON_"):] for k, v in vars(pb).items()
                   if k.startswith("FINISH_REASON_")}
        try:
            for resp in call:
                for t in resp.tokens:
                    yield {"sample": t.sample, "id": t.id, "text": t.text}
                for f in resp.finished:
                    yield {"sample": f.sample, "finish": reasons[f.reason], "tokens": f.tokens}
        except grpc.RpcError as e:
            raise RnnServeError(e.code(), e.details()) from None
        finally:
            call.cancel()
