"""TF Serving's REST API on the real rnnserve binary's --http-port, with curl (a client nobody
here wrote), against Keras's own numbers for the example model (tests/fixtures/example, rtol
1e-5): model status and metadata, :predict in the row (`instances`) and columnar (`inputs`)
formats, a version in the path, TF Serving's error bodies and codes, and bearer tokens. Exits 77
(skipped) when curl or numpy is missing."""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

failures = []
passed = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail if not ok else ''}", flush=True)
    (passed if ok else failures).append(name)


def curl(*args, data=None):
    """(status, parsed JSON body or None) of curl with `args`; `data` is the POST body."""
    code, body = server_process.curl(*args, data=data)
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    return code, parsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        server_process.skip(f"numpy is not installed ({e})")
    if shutil.which("curl") is None:
        server_process.skip("curl not found (deploy/install_deps.sh)")

    src = args.source_dir
    repo = os.path.join(src, "models/examples")
    x = np.load(os.path.join(src, "tests/fixtures/example/input.npy")).astype(np.float32)
    want = np.load(os.path.join(src, "tests/fixtures/example/expected.npy"))

    def close(got):
        got = np.asarray(got, np.float32)
        return got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)

    port = server_process.free_port()
    with server_process.running_server(args.server, repo, extra=["--http-port", str(port)]):
        base = f"http://127.0.0.1:{port}/v1/models/waveform_lstm"
        code, body = curl(base)
        status = (body or {}).get("model_version_status", [{}])
        check("StatusIsAvailable", code == 200 and status[0].get("state") == "AVAILABLE"
              and status[0].get("status", {}).get("error_code") == "OK", body)
        code, body = curl(f"{base}/metadata")
        sig = (body or {}).get("metadata", {}).get("signature_def", {}).get(
            "signature_def", {}).get("serving_default", {})
        check("MetadataHasServingDefault", code == 200 and "waveform" in sig.get("inputs", {}),
              body)
        code, body = curl(f"{base}:predict", data=json.dumps({"instances": x.tolist()}).encode())
        check("RowFormatPredictMatchesKeras",
              code == 200 and close(body.get("predictions")), body)
        code, body = curl(f"{base}/versions/1:predict",
                          data=json.dumps({"signature_name": "serving_default",
                                           "inputs": x.tolist()}).encode())
        check("ColumnarPredictOfVersion1MatchesKeras",
              code == 200 and close(body.get("outputs")), body)
        ragged = [x[0].tolist(), x[1][:5].tolist()]
        code, body = curl(f"{base}:predict", data=json.dumps({"instances": ragged}).encode())
        check("RaggedInstancesAre400", code == 400 and "error" in (body or {}), body)
        code, body = curl(f"{base}:predict", data=b'{"instances": [')
        check("MalformedJsonIs400", code == 400 and "error" in (body or {}), body)
        code, body = curl(f"{base}:predict", data=json.dumps(
            {"signature_name": "classify_me", "instances": x.tolist()}).encode())
        check("UnknownSignatureIsAnError", code in (400, 404) and "error" in (body or {}), body)
        code, body = curl(f"http://127.0.0.1:{port}/v1/models/no_such_model:predict",
                          data=json.dumps({"instances": x.tolist()}).encode())
        check("UnknownModelIs404", code == 404 and "error" in (body or {}), body)
        code, body = curl(f"{base}:classify", data=b'{"examples": []}')
        check("ClassifyIs501", code == 501 and "error" in (body or {}), body)

    with tempfile.TemporaryDirectory() as d:
        tokens = os.path.join(d, "tokens.txt")
        with open(tokens, "w") as f:
            f.write("rest-token-0123456789\n")
        port = server_process.free_port()
        # Health is open without a token, so the readiness probe needs none.
        with server_process.running_server(
                args.server, repo, extra=["--http-port", str(port), "--auth-token-file", tokens]):
            base = f"http://127.0.0.1:{port}/v1/models/waveform_lstm"
            payload = json.dumps({"instances": x.tolist()}).encode()
            code, body = curl(f"{base}:predict", data=payload)
            check("WithoutATokenIs401", code == 401 and "error" in (body or {}), body)
            code, body = curl("-H", "Authorization: Bearer rest-token-0123456789",
                              f"{base}:predict", data=payload)
            check("WithTheTokenMatchesKeras", code == 200 and close(body.get("predictions")),
                  body)

    print(f"{len(passed)} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
