"""`agentd health`: ask a running daemon's gRPC health service whether it serves.

For container and Kubernetes probes: Kubernetes' built-in grpc probe speaks plaintext
only, and agentd's TCP listener is TLS-only, so the probe runs this inside the
container against the daemon's unix socket (health answers without a token there and
on TCP). Exit 0 when SERVING, 1 otherwise, one line either way.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The API's service, as protos/agentd/v1/agentd.proto names it (a test holds the two
# equal): importing the generated module would cost the probe a third of its time.
SERVICE = "agentd.v1.Agentd"


def check(socket_path: str, timeout: float) -> tuple[bool, str]:
    """(serving, what to print)."""
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            # types-grpcio-health-checking's HealthStub declares no methods; grpc adds Check.
            reply = stub.Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout
            )
        except grpc.RpcError as exc:
            return False, f"agentd at {socket_path}: {exc.code().name}: {exc.details()}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, status
