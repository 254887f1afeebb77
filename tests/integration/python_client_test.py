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
    print("python client: 5 passed, 0 failed")
