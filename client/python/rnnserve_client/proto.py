"""The rnnserve.v1 messages, enums and service stub, built at import from the descriptors that
the package carries (rnnserve_v1.binpb, compiled from proto/ when the wheel is built).

Only protobuf's public API is used (DescriptorPool, message_factory), in a private pool, so
there is no gencode version to match: any protobuf from the package's floor up works, and
generated rnnserve.v1 modules imported elsewhere in the process do not collide.

    from rnnserve_client import proto
    proto.PredictRequest(...), proto.TYPE_FP32, proto.RnnServeStub(channel)
"""
import os

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "rnnserve.v1"


def _load_pool():
    with open(os.path.join(os.path.dirname(__file__), "rnnserve_v1.binpb"), "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read()).file
    pool = descriptor_pool.DescriptorPool()
    for fd in files:  # --include_imports lists dependencies first
        pool.AddSerializedFile(fd.SerializeToString())
    services = {f"{fd.package}.{s.name}": list(s.method) for fd in files for s in fd.service}
    return pool, [fd.name for fd in files if fd.package == _PACKAGE], services


# The services' methods come from the descriptor protos: MethodDescriptor has no streaming flags
# before protobuf 5.
_POOL, _FILES, _SERVICES = _load_pool()
if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
    _class_of = message_factory.GetMessageClass
else:
    _class_of = message_factory.MessageFactory(_POOL).GetPrototype


def message_class(full_name):
    """The message class of a type of the API, e.g. message_class("rnnserve.v1.Tensor")."""
    return _class_of(_POOL.FindMessageTypeByName(full_name))


def _export():
    names = {}
    for file_name in _FILES:
        fd = _POOL.FindFileByName(file_name)
        for name, desc in fd.message_types_by_name.items():
            names[name] = _class_of(desc)
        for enum in fd.enum_types_by_name.values():
            for value in enum.values:
                names[value.name] = value.number
    return names


globals().update(_export())


class RnnServeStub:
    """The rnnserve.v1.RnnServe service on a grpc.Channel: one callable per RPC, named as in the
    proto (stub.Predict(request, timeout=..., metadata=...))."""

    def __init__(self, channel, service=f"{_PACKAGE}.RnnServe"):
        kinds = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
                 (True, False): channel.stream_unary, (True, True): channel.stream_stream}
        for m in _SERVICES[service]:
            make = kinds[(m.client_streaming, m.server_streaming)]
            setattr(self, m.name, make(
                f"/{service}/{m.name}",
                request_serializer=message_class(m.input_type.lstrip(".")).SerializeToString,
                response_deserializer=message_class(m.output_type.lstrip(".")).FromString))
