#!/usr/bin/env python3
"""The Python client (pip install ./client/python) with TLS, a client certificate and a bearer
token against the real server started with --tls-cert/--tls-key/--tls-client-ca and
--auth-token-file; and gRPC reflection, on by default and off with --no-reflection.
Certificates are made with the openssl command. Exits 77 (skipped) when grpcio, grpcio-tools,
numpy, setuptools or openssl are missing (deploy/install_deps.sh installs them)."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

ROOT, SERVER = sys.argv[1], sys.argv[2]
try:
    import numpy as np
    import grpc
    import grpc_tools  # noqa: F401
    import setuptools  # noqa: F401
except ImportError as e:
    server_process.skip(f"{e} (deploy/install_deps.sh)")
if shutil.which("openssl") is None:
    server_process.skip("openssl not found (deploy/install_deps.sh)")

work = tempfile.TemporaryDirectory(prefix="rnnserve_security_py_")
D = work.name
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--root-user-action=ignore",
                "--no-build-isolation", "--no-deps", "--target", os.path.join(D, "site"),
                os.path.join(ROOT, "client/python")], check=True)
sys.path.insert(0, os.path.join(D, "site"))
from rnnserve_client import Client, RnnServeError  # noqa: E402


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True, cwd=D, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


EC = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
sh(f"openssl req -x509 {EC} -keyout ca.key -out ca.pem -days 2 -subj /CN=ca")
for name, san in (("server", "DNS:localhost,IP:127.0.0.1"), ("client", "DNS:client")):
    with open(os.path.join(D, name + ".ext"), "w") as f:
        f.write(f"subjectAltName={san}\n")
    sh(f"openssl req {EC} -keyout {name}.key -out {name}.csr -subj /CN={name}")
    sh(f"openssl x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
       f"-out {name}.pem -extfile {name}.ext")
TOKEN = "python-client-token-42"
with open(os.path.join(D, "tokens.txt"), "w") as f:
    f.write(TOKEN + "\n")
with open(os.path.join(D, "token_file.txt"), "w") as f:
    f.write("\n" + TOKEN + "\n")


def p(name):
    return os.path.join(D, name)


# A ServerReflectionRequest with list_services = "" (field 7), sent as a unary call: the
# reflection service answers it with the list of services.
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


def reflection_code(channel, metadata=()):
    call = channel.unary_unary(REFLECTION, request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    try:
        reply = call(b"\x3a\x00", timeout=10, metadata=metadata)
        assert b"rnnserve.v1.RnnServe" in reply, reply
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


x = np.load(os.path.join(ROOT, "tests/fixtures/example/input.npy"))
want = np.load(os.path.join(ROOT, "tests/fixtures/example/expected.npy"))
repo = os.path.join(ROOT, "models/examples")
secure = ["--tls-cert", p("server.pem"), "--tls-key", p("server.key"), "--tls-client-ca",
          p("ca.pem"), "--auth-token-file", p("tokens.txt")]
passed = 0
creds = grpc.ssl_channel_credentials(open(p("ca.pem"), "rb").read(),
                                     open(p("client.key"), "rb").read(),
                                     open(p("client.pem"), "rb").read())
with server_process.running_server(SERVER, repo, extra=secure, credentials=creds) as address:
    kw = dict(tls_ca=p("ca.pem"), tls_cert=p("client.pem"), tls_key=p("client.key"))
    c = Client(address, timeout=10, token_file=p("token_file.txt"), **kw)
    got = c.predict("waveform_lstm", x)["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    passed += 1

    try:
        Client(address, timeout=10, **kw).predict("waveform_lstm", x)
        raise AssertionError("a call without a token was answered")
    except RnnServeError as e:
        assert e.code.name == "UNAUTHENTICATED", e
    passed += 1

    try:
        Client(address, timeout=5, tls_ca=p("ca.pem"), token=TOKEN).list_models()
        raise AssertionError("a client without a certificate was answered")
    except RnnServeError as e:
        assert e.code.name == "UNAVAILABLE", e
    passed += 1

    assert reflection_code(grpc.secure_channel(address, creds)) == "OK"
    passed += 1

with server_process.running_server(SERVER, repo, extra=["--no-reflection"]) as address:
    code = reflection_code(grpc.insecure_channel(address))
    assert code == "UNIMPLEMENTED", code
    Client(address, timeout=10).list_models()  # the rest serves as before
    passed += 1

print(f"security (python client): {passed} passed, 0 failed")
