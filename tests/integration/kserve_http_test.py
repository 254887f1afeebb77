"""KServe v2 REST on the real rnnserve binary's --http-port, with clients nobody here wrote:
curl and tritonclient.http (JSON and binary tensor data), against Keras's own numbers for the
example model (tests/fixtures/example, rtol 1e-5); statistics that agree with gRPC's; the
repository extension over HTTP and over tritonclient.grpc; bearer tokens, TLS and mutual TLS;
a body over --max-message-bytes (413) and over --max-inflight-bytes (429); an idle client that
is closed while others are served. Exits 77 (skipped) when tritonclient[http], curl or openssl
are missing (deploy/install_deps.sh installs them)."""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

failures = []
passed = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail if not ok else ''}", flush=True)
    (passed if ok else failures).append(name)


curl = server_process.curl


def http_server(binary, repo, extra=(), credentials=None):
    port = server_process.free_port()
    return port, server_process.running_server(
        binary, repo, extra=["--http-port", str(port), *extra], credentials=credentials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    try:
        import numpy as np
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
    except (ImportError, RuntimeError) as e:
        server_process.skip(f"tritonclient[http,grpc] is not installed ({e}); "
                            "deploy/install_deps.sh installs it")
    for tool in ("curl", "openssl"):
        if shutil.which(tool) is None:
            server_process.skip(f"{tool} not found (deploy/install_deps.sh)")

    src = args.source_dir
    repo = os.path.join(src, "models/examples")
    x = np.load(os.path.join(src, "tests/fixtures/example/input.npy")).astype(np.float32)
    want = np.load(os.path.join(src, "tests/fixtures/example/expected.npy"))
    close = lambda got: got is not None and got.shape == want.shape and np.allclose(  # noqa: E731
        got, want, rtol=1e-5, atol=1e-6)

    port, server = http_server(args.server, repo)
    with server as grpc_url:
        base = f"http://127.0.0.1:{port}"
        code, body = curl(f"{base}/v2")
        meta = json.loads(body)
        check("CurlServerMetadata", code == 200 and "binary_tensor_data" in meta["extensions"]
              and "model_repository" in meta["extensions"], body)
        code, _ = curl(f"{base}/v2/health/live")
        check("CurlHealthLive", code == 200)
        code, _ = curl(f"{base}/v2/health/ready")
        check("CurlHealthReady", code == 200)
        request = {"inputs": [{"name": "waveform", "shape": list(x.shape), "datatype": "FP32",
                               "data": x.tolist()}]}
        code, body = curl("-H", "Content-Type: application/json",
                          f"{base}/v2/models/waveform_lstm/infer",
                          data=json.dumps(request).encode())
        out = json.loads(body)["outputs"][0] if code == 200 else None
        check("CurlInferJsonMatchesKeras", out is not None and close(
            np.array(out["data"], np.float32).reshape(out["shape"])), body[:300])
        code, body = curl(f"{base}/v2/models/no_such_model/infer", data=b"{}")
        check("CurlUnknownModelIs404", code == 404 and "error" in json.loads(body), body)
        code, body = curl(f"{base}/v2/models/waveform_lstm/infer", data=b"{\"inputs\": [")
        check("CurlMalformedJsonIs400", code == 400 and "error" in json.loads(body), body)
        code, body = curl(f"{base}/nothing/here")  # /v1/... is TF Serving's (400 there)
        check("CurlUnknownPathIs404Json", code == 404 and "error" in json.loads(body), body)

        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        check("HttpClientLiveReady", client.is_server_live() and client.is_server_ready()
              and client.is_model_ready("waveform_lstm"))
        mm = client.get_model_metadata("waveform_lstm")
        check("HttpClientModelMetadata", mm["inputs"][0]["name"] == "waveform"
              and mm["inputs"][0]["shape"] == [-1, -1, 2], mm)
        cfg = client.get_model_config("waveform_lstm")
        check("HttpClientModelConfig", cfg["max_batch_size"] == 64
              and cfg["input"][0]["dims"] == [-1, 2], cfg)
        for binary in (False, True):
            inp = httpclient.InferInput("waveform", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            outp = httpclient.InferRequestedOutput("probabilities", binary_data=binary)
            got = client.infer("waveform_lstm", [inp], outputs=[outp]).as_numpy("probabilities")
            check(f"HttpClient{'Binary' if binary else 'Json'}InferMatchesKeras", close(got),
                  got)
        lengths = httpclient.InferInput("lengths", [3], "INT32")
        lengths.set_data_from_numpy(np.array([40, 25, 12], np.int32))
        got = client.infer("waveform_lstm", [inp, lengths]).as_numpy("probabilities")
        check("HttpClientLengthsInputMatchesKeras", close(got))
        # Triton's extensions rnnserve does not serve answer 501 saying what to use instead.
        for name, call, instead in (
                ("SystemSharedMemory", lambda: client.register_system_shared_memory(
                    "r", "/rnnserve_test", 64), "binary tensor data"),
                ("CudaSharedMemory", lambda: client.get_cuda_shared_memory_status(),
                 "binary tensor data"),
                ("TraceSetting", lambda: client.get_trace_settings(), "/metrics"),
                ("LogSettings", lambda: client.get_log_settings(), "--log-level")):
            try:
                call()
                check(f"HttpClient{name}IsRefusedWithAdvice", False, "no error")
            except InferenceServerException as e:
                check(f"HttpClient{name}IsRefusedWithAdvice", "is not served" in e.message()
                      and instead in e.message(), f"{e.status()} {e.message()}")
        # One sequence in two chunks over server-held state: the last chunk's answer is the
        # whole sequence's.
        first = httpclient.InferInput("waveform", [1, 20, 2], "FP32")
        first.set_data_from_numpy(x[:1, :20])
        second = httpclient.InferInput("waveform", [1, 20, 2], "FP32")
        second.set_data_from_numpy(x[:1, 20:])
        client.infer("waveform_lstm", [first], sequence_id=42, sequence_start=True)
        got = client.infer("waveform_lstm", [second], sequence_id=42,
                           sequence_end=True).as_numpy("probabilities")
        check("HttpClientSequenceChunksMatchKeras", got is not None and np.allclose(
            got, want[:1], rtol=1e-5, atol=1e-5), got)
        bad = httpclient.InferInput("waveform", [1, 4, 3], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 4, 3), np.float32))
        try:
            client.infer("waveform_lstm", [bad])
            check("HttpClientWrongShapeIs400", False, "no error")
        except InferenceServerException as e:
            check("HttpClientWrongShapeIs400", e.status() == "400"
                  and "expected [?,?,2]" in e.message(), f"{e.status()} {e.message()}")

        gclient = grpcclient.InferenceServerClient(grpc_url)
        http_stats = client.get_inference_statistics("waveform_lstm")["model_stats"][0]
        grpc_stats = gclient.get_inference_statistics("waveform_lstm", as_json=True)
        grpc_stats = grpc_stats["model_stats"][0]
        check("StatisticsAgreeWithGrpc",
              http_stats["inference_count"] == int(grpc_stats["inference_count"]) >= 9
              and http_stats["inference_stats"]["success"]["count"]
              == int(grpc_stats["inference_stats"]["success"]["count"]),
              (http_stats, grpc_stats))

        index = gclient.get_model_repository_index(as_json=True)
        check("GrpcRepositoryIndex", [m["name"] for m in index["models"]] == ["waveform_lstm"],
              index)
        gclient.unload_model("waveform_lstm")
        check("GrpcRepositoryUnload", not gclient.is_model_ready("waveform_lstm")
              and not client.is_model_ready("waveform_lstm"))
        gclient.load_model("waveform_lstm")
        check("GrpcRepositoryLoad", gclient.is_model_ready("waveform_lstm"))
        client.unload_model("waveform_lstm")
        unloaded = not client.is_model_ready("waveform_lstm")
        client.load_model("waveform_lstm")
        check("HttpRepositoryUnloadLoad", unloaded and client.is_model_ready("waveform_lstm")
              and client.get_model_repository_index()[0]["state"] == "READY")
        try:
            gclient.load_model("waveform_lstm", config="{}")
            check("GrpcRepositoryConfigParameterIsRefused", False, "no error")
        except InferenceServerException as e:
            check("GrpcRepositoryConfigParameterIsRefused", "INVALID_ARGUMENT" in str(e.status()),
                  e)

    # Limits: a body over --max-message-bytes, a body over the byte budget; an idle client;
    # the connection cap.
    port, server = http_server(args.server, repo, extra=[
        "--max-message-bytes", "100000", "--max-inflight-bytes", "50000",
        "--http-read-timeout-seconds", "2", "--http-max-connections", "2"])
    with server:
        base = f"http://127.0.0.1:{port}"
        code, body = curl(f"{base}/v2/models/waveform_lstm/infer", data=b" " * 150000)
        check("BodyOverMaxMessageBytesIs413", code == 413 and "error" in json.loads(body),
              (code, body))
        code, body = curl(f"{base}/v2/models/waveform_lstm/infer", data=b" " * 60000)
        check("BodyOverByteBudgetIs429", code == 429 and b"RESOURCE_EXHAUSTED" in body,
              (code, body))
        idle = socket.create_connection(("127.0.0.1", port))
        idle.sendall(b"POST /v2/models/waveform_lstm/infer HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 100\r\n\r\n{")
        request = {"inputs": [{"name": "waveform", "shape": [1, 3, 2], "datatype": "FP32",
                               "data": [0.0] * 6}]}
        code, _ = curl(f"{base}/v2/models/waveform_lstm/infer", data=json.dumps(request).encode())
        check("OthersAreServedWhileAClientIdles", code == 200, code)
        idle.settimeout(30)
        try:
            closed = idle.recv(4096) is not None  # b"" (closed) or an error answer, then closed
        except socket.timeout:
            closed = False
        check("IdleClientIsClosed", closed)
        idle.close()

        # 12 clients connect and send nothing: 2 are served (each holds a thread until the
        # read timeout), 2 wait accepted, one more is in the accept loop's hand, the rest are
        # not accepted: the server holds at most 2 * --http-max-connections + 1 sockets.
        ss = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True,
                            text=True).stdout
        pid = int(ss.split("pid=")[1].split(",")[0])
        fds = lambda: len(os.listdir(f"/proc/{pid}/fd"))  # noqa: E731
        time.sleep(0.5)  # the clients above are gone
        before = fds()
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
        time.sleep(0.5)
        held = fds() - before
        check("ConnectionsBeyondTheCapAreNotAccepted", held <= 5, f"{held} sockets held")
        for c in clients:
            c.close()
        code, _ = curl(f"{base}/v2/health/ready")
        check("ServedAgainAfterTheIdleClientsLeave", code == 200, code)

    # Tokens, TLS and mutual TLS.
    work = tempfile.TemporaryDirectory(prefix="rnnserve_http_")
    d = work.name

    def sh(cmd):
        subprocess.run(cmd, shell=True, check=True, cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    sh(f"openssl req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=ca")
    for name, san in (("server", "DNS:localhost,IP:127.0.0.1"), ("client", "DNS:client")):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        sh(f"openssl req {ec} -keyout {name}.key -out {name}.csr -subj /CN={name} && "
           f"openssl x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
           f"-days 2 -out {name}.pem -extfile {name}.ext")
    with open(os.path.join(d, "tokens"), "w") as f:
        f.write("inference-token\n")
    with open(os.path.join(d, "admin"), "w") as f:
        f.write("admin-token\n")
    p = lambda name: os.path.join(d, name)  # noqa: E731
    import grpc
    with open(p("ca.pem"), "rb") as ca, open(p("client.key"), "rb") as k, \
            open(p("client.pem"), "rb") as c:
        credentials = grpc.ssl_channel_credentials(ca.read(), k.read(), c.read())
    port, server = http_server(args.server, repo, credentials=credentials, extra=[
        "--tls-cert", p("server.pem"), "--tls-key", p("server.key"),
        "--tls-client-ca", p("ca.pem"), "--auth-token-file", p("tokens"),
        "--admin-token-file", p("admin")])
    with server:
        base = f"https://127.0.0.1:{port}"
        tls = ["--cacert", p("ca.pem"), "--cert", p("client.pem"), "--key", p("client.key")]
        code, _ = curl(*tls, f"{base}/v2/health/ready")
        check("TlsHealthNeedsNoToken", code == 200, code)
        code, body = curl(*tls, f"{base}/v2/models/waveform_lstm")
        check("TlsNoTokenIs401", code == 401 and b"UNAUTHENTICATED" in body, (code, body))
        bearer = lambda t: ["-H", f"Authorization: Bearer {t}"]  # noqa: E731
        code, _ = curl(*tls, *bearer("inference-token"), f"{base}/v2/models/waveform_lstm")
        check("TlsInferenceTokenReadsMetadata", code == 200, code)
        request = {"inputs": [{"name": "waveform", "shape": list(x.shape), "datatype": "FP32",
                               "data": x.tolist()}]}
        code, body = curl(*tls, *bearer("inference-token"),
                          f"{base}/v2/models/waveform_lstm/infer",
                          data=json.dumps(request).encode())
        out = json.loads(body)["outputs"][0] if code == 200 else None
        check("TlsInferMatchesKeras", out is not None and close(
            np.array(out["data"], np.float32).reshape(out["shape"])), (code, body[:200]))
        code, body = curl(*tls, *bearer("inference-token"), "-X", "POST",
                          f"{base}/v2/repository/models/waveform_lstm/load")
        check("InferenceTokenLoadIs403", code == 403 and b"PERMISSION_DENIED" in body,
              (code, body))
        code, _ = curl(*tls, *bearer("admin-token"), "-X", "POST",
                       f"{base}/v2/repository/models/waveform_lstm/load")
        check("AdminTokenLoads", code == 200, code)
        code, _ = curl("--cacert", p("ca.pem"), f"{base}/v2/health/live")
        check("TlsWithoutClientCertificateIsRefused", code == 0, code)
        code, _ = curl(f"http://127.0.0.1:{port}/v2/health/live")
        check("PlaintextToTlsPortIsRefused", code != 200, code)

    print(f"{len(passed)} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
