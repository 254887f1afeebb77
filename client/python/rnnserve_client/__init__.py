"""A thin Python client of rnnserve: numpy arrays in, numpy arrays out.

    from rnnserve_client import Client
    c = Client("127.0.0.1:8500")
    probs = c.predict("waveform_lstm", x)["probabilities"]      # x: [B, T, F] float array
    c.evaluate("waveform_lstm", x, y)                            # {"loss": ..., "accuracy": ...}

Run client/python/build_stubs.sh once to generate the gRPC stubs (pip install grpcio-tools).
"""
from .client import Client, RnnServeError  # noqa: F401
