#!/usr/bin/env python3
"""The Python client as a wheel, installed the way users install it beside other packages:

1. `pip wheel client/python` builds the wheel out of the checkout (the checkout gains no build/
   or *.egg-info, nor any other file);
2. in a fresh venv, the wheel at the dependency floors its pyproject.toml states (protobuf and
   grpcio pinned to them) calls the real server;
3. in another fresh venv, the wheel and then `tritonclient[grpc]` (which moves protobuf to the
   major version it pins) call the real server from one process.

Each venv ends with `pip check` (no conflict between what the packages declare). The venvs are
kept under WORK (the build folder) and reused: a rerun installs only the new wheel, offline.
Exits 77 (skipped, with the reason) when the package index cannot be reached to make them.

usage: python_client_wheel_test.py SOURCE_DIR RNNSERVE_BINARY WORK
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_process  # noqa: E402

ROOT, SERVER, WORK = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
PKG = os.path.join(ROOT, "client", "python")
CALL = os.path.join(HERE, "python_client_wheel_call.py")


def floors():
    """{"protobuf": "4.21.6", "grpcio": ...}: the `>=` floors of pyproject.toml's dependencies."""
    text = open(os.path.join(PKG, "pyproject.toml")).read()
    deps = re.search(r"^dependencies = \[(.*)\]$", text, re.M).group(1)
    found = dict(re.findall(r'"(protobuf|grpcio)>=([0-9.]+)"', deps))
    assert set(found) == {"protobuf", "grpcio"}, f"no protobuf/grpcio floors in {deps}"
    return found


def tree(path):
    """Every file and folder under path, ignored ones included, but no __pycache__."""
    out = set()
    for d, dirs, files in os.walk(path):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out.update(os.path.relpath(os.path.join(d, x), path) for x in dirs + files)
    return out


def index_reachable():
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(url, timeout=15):
            return True, url
    except Exception as e:  # noqa: BLE001 (any failure means: no index)
        return False, f"{url}: {e}"


def run(*cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def venv(name, first_installs, wheel):
    """WORK/<name>: made once (python3 -m venv, then each of first_installs, a list of pip
    argument lists, in order); on every run the wheel is reinstalled without touching the rest."""
    path = os.path.join(WORK, name)
    py = os.path.join(path, "bin", "python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
    if not os.path.exists(os.path.join(path, ".ready")):
        ok, why = index_reachable()
        if not ok:
            server_process.skip(f"the package index is unreachable ({why}); the venv {path} "
                                "needs it once")
        shutil.rmtree(path, ignore_errors=True)
        run(sys.executable, "-m", "venv", path)
        for args in first_installs:
            run(*pip, "install", *args)
        open(os.path.join(path, ".ready"), "w").close()
    run(*pip, "install", "--force-reinstall", "--no-deps", wheel)
    run(*pip, "check")
    return py


def main():
    try:
        import grpc_tools  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        server_process.skip(f"{e} (the wheel is built with the grpcio-tools and setuptools "
                            "installed here; deploy/install_deps.sh)")
    os.makedirs(WORK, exist_ok=True)
    before = tree(PKG)
    with tempfile.TemporaryDirectory(prefix="rnnserve_wheel_") as out:
        run(sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel",
            "--no-build-isolation", "--no-deps", "-w", out, PKG)
        new = sorted(tree(PKG) - before)
        assert not new, f"building the wheel wrote into the checkout: {new}"
        wheel = os.path.join(WORK, "rnnserve_client-0.1.0-py3-none-any.whl")
        shutil.copy(glob.glob(os.path.join(out, "rnnserve_client-*.whl"))[0], wheel)
    print(f"PASS WheelLeavesCheckoutAsItWas ({PKG})", flush=True)

    f = floors()
    pinned = dict(f)
    try:  # wheels only: no 20-minute compile of an old grpcio
        at_floor = venv("venv_floor", [["--only-binary=:all:", wheel, f"protobuf=={f['protobuf']}",
                                        f"grpcio=={f['grpcio']}"]], wheel)
    except subprocess.CalledProcessError:
        # grpcio's floor has no wheel for this Python (3.12 and later); the protobuf floor does
        # (abi3), and is what the package's stubs depend on.
        print(f"NOTE: grpcio=={f['grpcio']} has no wheel for Python {sys.version.split()[0]}; "
              f"the floor venv pins protobuf=={f['protobuf']} alone", flush=True)
        del pinned["grpcio"]
        at_floor = venv("venv_floor", [["--only-binary=:all:", wheel,
                                        f"protobuf=={f['protobuf']}"]], wheel)
    beside_triton = venv("venv_tritonclient", [[wheel], ["tritonclient[grpc]"]], wheel)

    with server_process.running_server(SERVER, os.path.join(ROOT, "models/examples")) as address:
        run(at_floor, CALL, ROOT, address)
        version = subprocess.run([at_floor, "-c", "import google.protobuf as p, grpc;"
                                  "print(p.__version__, grpc.__version__)"],
                                 check=True, capture_output=True, text=True).stdout.split()
        got = dict(zip(["protobuf", "grpcio"], version))
        assert all(got[k] == v for k, v in pinned.items()), (got, pinned)
        print(f"PASS AtTheStatedFloors protobuf {version[0]} grpcio {version[1]}", flush=True)
        run(beside_triton, CALL, ROOT, address, "--tritonclient")
        print("PASS BesideTritonclientGrpc", flush=True)
    print("python client wheel: 3 passed, 0 failed")


if __name__ == "__main__":
    main()
