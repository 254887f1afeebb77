"""A thin Python client of rnnserve: numpy arrays in, numpy arrays out.

    from rnnserve_client import Client
    c = Client("127.0.0.1:8500")
    probs = c.predict("waveform_lstm", x)["probabilities"]      # x: [B, T, F] float array
    c.evaluate("waveform_lstm", x, y)                            # {"loss": ..., "accuracy": ...}

Install with `pip install ./client/python` (from the repository root). The rnnserve.v1 messages
and service stub are built at import from descriptors compiled into the package
(rnnserve_client.proto), so any protobuf from the package's floor up serves.
"""
from .client import Client, RnnServeError  # noqa: F401
