"""The one place a domain error (foundation/errors.py) becomes a gRPC status.

The domain raises typed errors and never names a transport's codes; the handlers'
wrappers (handlers/rpc.py) end an RPC with the status this table gives the nearest
class of the error, and its message as the details.
"""

from __future__ import annotations

import grpc

from agentd.foundation import errors

STATUS: dict[type[errors.AgentdError], grpc.StatusCode] = {
    errors.InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Exhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
}


def status_of(exc: errors.AgentdError) -> grpc.StatusCode:
    """The status of the nearest class of `exc` in STATUS; INTERNAL for one it lacks."""
    for cls in type(exc).__mro__:
        if (code := STATUS.get(cls)) is not None:
            return code
    return grpc.StatusCode.INTERNAL
