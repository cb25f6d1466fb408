"""The thin client of agentd: `Client`, `AsyncClient`, and the nouns they return.

from agentd_client import Client
with Client() as c:
    session = c.create_session(workspace="/src/project")
    result = c.run_tool(session.id, "Read", {"file_path": "README.md"})
    print(result.text, result.is_error, result.data)

`connect("devbox")` opens a Client the way `agentctl --context devbox` connects.
Failures raise the typed errors of `agentd_client.core.errors`.
"""

import importlib
import os
from typing import TYPE_CHECKING, Any

# gRPC's documented default, set before grpc is imported: without it grpc 1.6x's core
# also prints INFO lines (a failed TLS handshake) under agentctl's one-line errors.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# Loaded on first use (PEP 562): `import agentd_client.core.paths` (agentd health, a probe
# with a 3 s budget) then costs no gRPC channel code, and agentctl loads what its
# command needs.
_LAZY = {
    "AgentdError": "agentd_client.core.errors",
    "Approver": "agentd_client.core.approver",
    "AsyncApprover": "agentd_client.core.approver",
    "AsyncClient": "agentd_client.core.aio",
    "AsyncStream": "agentd_client.core.aio",
    "Client": "agentd_client.core.client",
    "DocumentBlock": "agentd_client.core.calls",
    "Event": "agentd_client.core.calls",
    "ImageBlock": "agentd_client.core.calls",
    "PermissionAsk": "agentd_client.core.approver",
    "Progress": "agentd_client.core.calls",
    "Session": "agentd_client.core.calls",
    "Status": "agentd_client.core.status",
    "Stream": "agentd_client.core.client",
    "Task": "agentd_client.core.calls",
    "TextBlock": "agentd_client.core.calls",
    "ToolResult": "agentd_client.core.calls",
    "connect": "agentd_client.core.contexts",
    "default_socket_path": "agentd_client.core.paths",
}

if TYPE_CHECKING:
    from agentd_client.core.aio import AsyncClient, AsyncStream
    from agentd_client.core.approver import Approver, AsyncApprover, PermissionAsk
    from agentd_client.core.calls import (
        DocumentBlock,
        Event,
        ImageBlock,
        Progress,
        Session,
        Task,
        TextBlock,
        ToolResult,
    )
    from agentd_client.core.client import Client, Stream
    from agentd_client.core.contexts import connect
    from agentd_client.core.errors import AgentdError
    from agentd_client.core.paths import default_socket_path
    from agentd_client.core.status import Status


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
    "Status",
    "Stream",
    "Task",
    "TextBlock",
    "ToolResult",
    "connect",
    "default_socket_path",
]
