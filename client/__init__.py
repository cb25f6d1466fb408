"""The thin client of agentd: `Client`, `AsyncClient`, and the nouns they return.

from agentd_client import Client
with Client() as c:
    session = c.create_session(workspace="/src/project")
    result = c.run_tool(session.id, "Read", {"file_path": "README.md"})
    print(result.text, result.is_error, result.data)

`connect("devbox")` opens a Client the way `agentctl --context devbox` connects.
Failures raise the typed errors of `agentd_client.errors`.
"""

import importlib
import os
from typing import TYPE_CHECKING, Any

# gRPC's documented default, set before grpc is imported: without it grpc 1.6x's core
# also prints INFO lines (a failed TLS handshake) under agentctl's one-line errors.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# Loaded on first use (PEP 562): `import agentd_client.paths` (agentd health, a probe
# with a 3 s budget) then costs no gRPC channel code, and agentctl loads what its
# command needs.
_LAZY = {
    "AgentdError": "agentd_client.errors",
    "Approver": "agentd_client.approver",
    "AsyncApprover": "agentd_client.approver",
    "AsyncClient": "agentd_client._aio",
    "AsyncStream": "agentd_client._aio",
    "Client": "agentd_client._client",
    "DocumentBlock": "agentd_client._calls",
    "Event": "agentd_client._calls",
    "ImageBlock": "agentd_client._calls",
    "PermissionAsk": "agentd_client.approver",
    "Progress": "agentd_client._calls",
    "Session": "agentd_client._calls",
    "Stream": "agentd_client._client",
    "Task": "agentd_client._calls",
    "TextBlock": "agentd_client._calls",
    "ToolResult": "agentd_client._calls",
    "connect": "agentd_client.contexts",
    "default_socket_path": "agentd_client.paths",
}

if TYPE_CHECKING:
    from agentd_client._aio import AsyncClient, AsyncStream
    from agentd_client._calls import (
        DocumentBlock,
        Event,
        ImageBlock,
        Progress,
        Session,
        Task,
        TextBlock,
        ToolResult,
    )
    from agentd_client._client import Client, Stream
    from agentd_client.approver import Approver, AsyncApprover, PermissionAsk
    from agentd_client.contexts import connect
    from agentd_client.errors import AgentdError
    from agentd_client.paths import default_socket_path


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentd_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AgentdError",
    "Approver",
    "AsyncApprover",
    "AsyncClient",
    "AsyncStream",
    "Client",
    "DocumentBlock",
    "Event",
    "ImageBlock",
    "PermissionAsk",
    "Progress",
    "Session",
    "Stream",
    "Task",
    "TextBlock",
    "ToolResult",
    "connect",
    "default_socket_path",
]
