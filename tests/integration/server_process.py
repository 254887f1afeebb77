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


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(binary, repo, timeout_s=60, extra=()):
    """Yields "127.0.0.1:<port>" once the server accepts connections; stops it with SIGTERM.
    `extra`: more rnnserve flags."""
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--model-repository", repo, "--port", str(port), "--metrics-port", "0",
         "--log-level", "warning", *extra])
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
        yield f"127.0.0.1:{port}"
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
