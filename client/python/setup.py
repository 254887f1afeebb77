"""Generates the rnnserve.v1 gRPC stubs from ../../proto while the package is built.

The stubs are installed as the package `rnnserve.v1` (the module names protoc gives the protos'
import paths), beside `rnnserve_client`. Their code checks at import that protobuf and grpcio are
no older than the generator, so the dependencies are pinned from below to the versions in the
build environment.
"""
import os
from importlib.metadata import version

import grpc_tools
from grpc_tools import protoc
from google import protobuf
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["rnnserve/v1/model_config.proto", "rnnserve/v1/rnnserve.proto"]


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}",
                f"--python_out={self.build_lib}", f"--grpc_python_out={self.build_lib}"]
        if protoc.main(args + [os.path.join(PROTO_ROOT, p) for p in PROTOS]) != 0:
            raise RuntimeError(f"protoc failed on {PROTOS} under {PROTO_ROOT}")
        for package in ("rnnserve", os.path.join("rnnserve", "v1")):
            open(os.path.join(self.build_lib, package, "__init__.py"), "a").close()


setup(
    cmdclass={"build_py": BuildPyWithStubs},
    install_requires=["numpy", f"grpcio>={version('grpcio-tools')}",
                      f"protobuf>={protobuf.__version__}"],
)
