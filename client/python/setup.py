"""Builds the wheel of rnnserve_client without writing into the source tree.

The rnnserve.v1 API travels in the package as a serialized FileDescriptorSet
(rnnserve_client/rnnserve_v1.binpb), made here from ../../proto by grpcio-tools' protoc. No
Python code is generated: rnnserve_client/proto.py builds the message classes and the service
stub from the descriptors through protobuf's public API at import, so the package carries no
gencode version and works with every protobuf runtime from the floor in pyproject.toml up
(generated *_pb2.py files refuse a runtime older than their generator).

setuptools' scratch folders (build/, *.egg-info) go to a temporary folder, so `pip wheel` and
`pip install` leave the checkout as it was.
"""
import atexit
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["rnnserve/v1/model_config.proto", "rnnserve/v1/rnnserve.proto"]
DESCRIPTORS = os.path.join("rnnserve_client", "rnnserve_v1.binpb")


class BuildPyWithDescriptors(build_py):
    def run(self):
        super().run()
        import grpc_tools
        from grpc_tools import protoc

        out = os.path.join(self.build_lib, DESCRIPTORS)
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", "--include_imports",
                f"--descriptor_set_out={out}"]
        if protoc.main(args + [os.path.join(PROTO_ROOT, p) for p in PROTOS]) != 0:
            raise RuntimeError(f"protoc failed on {PROTOS} under {PROTO_ROOT}")


scratch = tempfile.mkdtemp(prefix="rnnserve_client_build_")
atexit.register(shutil.rmtree, scratch, ignore_errors=True)
setup(
    cmdclass={"build_py": BuildPyWithDescriptors},
    options={"build": {"build_base": os.path.join(scratch, "build")},
             "egg_info": {"egg_base": scratch}},
)
