"""The thin client of agentd: `Client`, `AsyncClient`, and the nouns they return.

from agentd_client import Client
with Client() as c:
    session = c.create_session(workspace="/src/project")
    result = c.run_tool(session.id, "Read", {"file_path": "README.md"})
    print(result.text, result.is_error, result.data)

`connect("devbox")` opens a Client the way `agentctl --context devbox` connects.
Failures raise the typed errors of `agentd_client.errors`.
"""

import os

# gRPC's documented default, set before grpc is imported: without it grpc 1.6x's core
# also prints INFO lines (a failed TLS handshake) under agentctl's one-line errors.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from agentd_client._aio import AsyncClient, AsyncStream  # noqa: E402
from agentd_client._calls import (  # noqa: E402
    DocumentBlock,
    Event,
    ImageBlock,
    Progress,
    Session,
    Task,
    TextBlock,
    ToolResult,
)
from agentd_client._channel import default_socket_path  # noqa: E402
from agentd_client._client import Client, Stream  # noqa: E402
from agentd_client.approver import Approver, AsyncApprover, PermissionAsk  # noqa: E402
from agentd_client.contexts import connect  # noqa: E402
from agentd_client.errors import AgentdError  # noqa: E402

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
