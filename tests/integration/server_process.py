"""Starts the real rnnserve binary on a free loopback port for the Python integration tests (the
Python side of server_process.h): running_server() yields its address and stops it with SIGTERM.

Exit code 77 is ctest's SKIP_RETURN_CODE for these tests: skip() prints the reason and uses it.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time

SKIP = 77


def skip(reason):
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def curl(*args, data=None):
    """(HTTP status, body bytes) of curl with `args`; `data` is sent as the POST body."""
    cmd = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args]
    if data is not None:
        cmd += ["--data-binary", "@-"]
    p = subprocess.run(cmd, input=data, capture_output=True, timeout=60)
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code or 0), body


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# grpc.health.v1.Health/Check of the whole server: an empty request, and the response
# {status: SERVING} is field 1 = 1.
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING = b"\x08\x01"


def serving(address, credentials=None):
    """Whether the server's gRPC health is SERVING (its initial loads are done)."""
    import grpc
    channel = (grpc.secure_channel(address, credentials) if credentials is not None
               else grpc.insecure_channel(address))
    with channel:
        check = channel.unary_unary(HEALTH_CHECK, request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        try:
            return check(b"", timeout=1) == SERVING
        except grpc.RpcError:
            return False


@contextlib.contextmanager
def running_server(binary, repo, timeout_s=60, extra=(), credentials=None):
    """Yields "127.0.0.1:<port>" once the server is ready (health SERVING over `credentials`,
    grpc.ChannelCredentials for a TLS server); stops it with SIGTERM. `extra`: more rnnserve
    flags."""
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--model-repository", repo, "--port", str(port), "--metrics-port", "0", "--http-port", "0",
         "--log-level", "warning", "--drain-seconds", "0", *extra])
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"rnnserve exited during start-up with {proc.returncode}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"rnnserve did not listen on port {port} within {timeout_s} s")
            time.sleep(0.05)
        address = f"127.0.0.1:{port}"
        while not serving(address, credentials):
            if proc.poll() is not None:
                raise RuntimeError(f"rnnserve exited while loading with {proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"rnnserve was not ready within {timeout_s} s")
            time.sleep(0.05)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_perf_analyzer():
    """The perf_analyzer binary: $PERF_ANALYZER, then PATH, then /opt/perf_analyzer/bin."""
    import shutil
    for candidate in (os.environ.get("PERF_ANALYZER"), shutil.which("perf_analyzer"),
                      "/opt/perf_analyzer/bin/perf_analyzer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def perf_analyzer_env():
    """perf_analyzer's wheel links libcudart.so.12 even for CPU-only runs; the PyPI package
    nvidia-cuda-runtime-cu12 provides it."""
    env = dict(os.environ)
    try:
        import nvidia.cuda_runtime as cr
        libdirs = [os.path.join(p, "lib") for p in cr.__path__]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs + [env.get("LD_LIBRARY_PATH", "")])
    except ImportError:
        pass
    return env
