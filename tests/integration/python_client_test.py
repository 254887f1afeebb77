#!/usr/bin/env python3
"""The Python client, installed as a user installs it (pip install ./client/python, here into a
temporary --target directory), against the real server: predict, evaluate and stream on the
example model give Keras's numbers. Exits 77 (skipped) when grpcio/grpcio-tools/numpy/setuptools
are missing (deploy/install_deps.sh installs them)."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

ROOT, SERVER = sys.argv[1], sys.argv[2]
try:
    import numpy as np
    import grpc  # noqa: F401
    import grpc_tools  # noqa: F401
    import setuptools  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: {e} (deploy/install_deps.sh)")
    sys.exit(77)

# The build uses the grpcio-tools and setuptools installed here (no download), and the installed
# package's dependencies are those already present.
site = tempfile.TemporaryDirectory(prefix="rnnserve_client_")
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--root-user-action=ignore",
                "--no-build-isolation", "--no-deps", "--target", site.name,
                os.path.join(ROOT, "client/python")], check=True)
sys.path.insert(0, site.name)
from rnnserve_client import Client, RnnServeError  # noqa: E402

with server_process.running_server(SERVER, os.path.join(ROOT, "models/examples")) as address:
    c = Client(address, timeout=10)
    x = np.load(os.path.join(ROOT, "tests/fixtures/example/input.npy"))
    want = np.load(os.path.join(ROOT, "tests/fixtures/example/expected.npy"))
    got = c.predict("waveform_lstm", x)["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    result = c.evaluate("waveform_lstm", x, np.array([0, 1, 2]))
    manual = -np.mean(np.log(np.clip(want[np.arange(3), [0, 1, 2]], 1e-7, 1 - 1e-7)))
    assert abs(result["loss"] - manual) < 1e-5 * manual, (result, manual)
    assert "accuracy" in result, result

    chunks = [x[2:3, i:i + 5] for i in range(0, 12, 5)]  # sequence 2 has 12 real steps
    outs = list(c.stream("waveform_lstm", chunks, sequence_id=9))
    np.testing.assert_allclose(outs[-1]["probabilities"][0], want[2], rtol=1e-5, atol=1e-6)

    try:
        c.predict("waveform_lstm", np.zeros((1, 4, 3), np.float32))
        raise AssertionError("a wrong shape was accepted")
    except RnnServeError as e:
        assert e.code.name == "INVALID_ARGUMENT" and "expected [?,?,2]" in str(e), e
    try:
        c.predict("waveform_lstm", {"wave": x})
        raise AssertionError("a wrong input name was accepted")
    except ValueError as e:
        assert "no input 'wave'; its inputs: waveform" in str(e), e

# The stream names its sequence in the x-sequence-id header, where a proxy can hash it: a
# stand-in server records the metadata the client sends.
from concurrent import futures  # noqa: E402
import grpc  # noqa: E402
from rnnserve_client import proto as pb  # noqa: E402

seen = []


def metadata_of(request, context):
    return pb.ModelMetadataResponse(inputs=[pb.TensorInfo(name="in", dtype=pb.TYPE_FP32)])


def stream_of(requests, context):
    seen.append(dict(context.invocation_metadata()))
    for r in requests:
        yield pb.StreamPredictResponse(sequence_id=r.sequence_id)


handlers = {
    "ModelMetadata": grpc.unary_unary_rpc_method_handler(
        metadata_of, request_deserializer=pb.ModelMetadataRequest.FromString,
        response_serializer=pb.ModelMetadataResponse.SerializeToString),
    "StreamPredict": grpc.stream_stream_rpc_method_handler(
        stream_of, request_deserializer=pb.StreamPredictRequest.FromString,
        response_serializer=pb.StreamPredictResponse.SerializeToString),
}
stand_in = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
stand_in.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("rnnserve.v1.RnnServe",
                                                                        handlers),))
port = stand_in.add_insecure_port("127.0.0.1:0")
stand_in.start()
try:
    list(Client(f"127.0.0.1:{port}", timeout=10).stream("m", [np.zeros((1, 2, 1), np.float32)],
                                                          sequence_id=4242))
finally:
    stand_in.stop(None)
assert seen and seen[0].get("x-sequence-id") == "4242", seen
print("python client: 6 passed, 0 failed")
