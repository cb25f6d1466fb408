"""The thin client of agentd: `Client`, `AsyncClient`, and the nouns they return.

from agentd_client import Client
with Client() as c:
    session = c.create_session(workspace="/src/project")
    result = c.run_tool(session.id, "Read", {"file_path": "README.md"})
    print(result.text, result.is_error, result.data)

`connect("devbox")` opens a Client the way `agentctl --context devbox` connects.
"""

import os

# gRPC's documented default, set before grpc is imported: without it grpc 1.6x's core
# also prints INFO lines (a failed TLS handshake) under agentctl's one-line errors.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from agentd_client._client import (  # noqa: E402
    AsyncClient,
    Client,
    Event,
    ImageBlock,
    Progress,
    Session,
    Task,
    TextBlock,
    ToolResult,
    default_socket_path,
)
from agentd_client.contexts import connect  # noqa: E402

__all__ = [
    "AsyncClient",
    "Client",
    "Event",
    "ImageBlock",
    "Progress",
    "Session",
    "Task",
    "TextBlock",
    "ToolResult",
    "connect",
    "default_socket_path",
]
