"""A thin Python client of rnnserve: numpy arrays in, numpy arrays out.

    from rnnserve_client import Client
    c = Client("127.0.0.1:8500")
    probs = c.predict("waveform_lstm", x)["probabilities"]      # x: [B, T, F] float array
    c.evaluate("waveform_lstm", x, y)                            # {"loss": ..., "accuracy": ...}

Install with `pip install ./client/python` (from the repository root): the build generates the
gRPC stubs.
"""
from .client import Client, RnnServeError  # noqa: F401
