"""gRPC server reflection as grpc.reflection.v1 and v1alpha, both.

Clients ask v1 first (grpcurl 1.8.8 on, Postman, grpc's own CLI), some only v1;
grpcio-reflection implements v1alpha only. The v1 protocol is v1alpha's messages under
another package (grpc/reflection/v1/reflection.proto is the v1alpha file renamed, field
for field), so one servicer answers both: v1's file descriptor is v1alpha's with the
package renamed, added to the descriptor pool so reflection can describe itself under
either name, and v1's method reads and writes with v1alpha's message classes, whose
bytes on the wire are the same.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1ALPHA = reflection.SERVICE_NAME  # grpc.reflection.v1alpha.ServerReflection
V1 = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _v1_descriptor() -> None:
    """Adds v1's file (v1alpha's, renamed) to the default pool, once."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old, new = f".{proto.package}.", ".grpc.reflection.v1."
    proto.name, proto.package = _V1_FILE, "grpc.reflection.v1"
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(old):  # a scalar has none, and must keep none
                field.type_name = new + field.type_name.removeprefix(old)
    for service in proto.service:
        for method in service.method:
            method.input_type = new + method.input_type.removeprefix(old)
            method.output_type = new + method.output_type.removeprefix(old)
    pool.AddSerializedFile(proto.SerializeToString())


def enable(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Reflection on `server` for `service_names` and itself, in both versions."""
    _v1_descriptor()
    servicer = reflection.aio.ReflectionServicer((*service_names, V1, V1ALPHA))
    method = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": method})
            for name in (V1, V1ALPHA)
        ]
    )
