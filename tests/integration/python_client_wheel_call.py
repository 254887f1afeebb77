#!/usr/bin/env python3
"""Run inside a venv by python_client_wheel_test.py: imports the installed rnnserve_client and
calls the real server at ADDRESS (predict and stream on the example model against Keras's
numbers from tests/fixtures/example); with --tritonclient, tritonclient.grpc is imported into the
same process first and asks the same server whether the model is ready. Prints the protobuf and
grpcio versions it ran with."""
import argparse
import os

ap = argparse.ArgumentParser()
ap.add_argument("root")
ap.add_argument("address")
ap.add_argument("--tritonclient", action="store_true")
args = ap.parse_args()

if args.tritonclient:
    import tritonclient.grpc as grpcclient
    assert grpcclient.InferenceServerClient(args.address).is_model_ready("waveform_lstm")

import google.protobuf  # noqa: E402
import grpc  # noqa: E402
import numpy as np  # noqa: E402
from rnnserve_client import Client  # noqa: E402

x = np.load(os.path.join(args.root, "tests/fixtures/example/input.npy"))
want = np.load(os.path.join(args.root, "tests/fixtures/example/expected.npy"))
c = Client(args.address, timeout=10)
np.testing.assert_allclose(c.predict("waveform_lstm", x)["probabilities"], want, rtol=1e-5,
                           atol=1e-6)
chunks = [x[2:3, i:i + 5] for i in range(0, 12, 5)]  # sequence 2 has 12 real steps
outs = list(c.stream("waveform_lstm", chunks, sequence_id=3))
np.testing.assert_allclose(outs[-1]["probabilities"][0], want[2], rtol=1e-5, atol=1e-6)
print(f"predict and stream match Keras with protobuf {google.protobuf.__version__}, "
      f"grpcio {grpc.__version__}" + (" beside tritonclient" if args.tritonclient else ""),
      flush=True)
