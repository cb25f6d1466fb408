"""The thin client of agentd: `Client`, `AsyncClient`, and the nouns they return.

from agentd_client import Client
with Client() as c:
    session = c.create_session(workspace="/src/project")
    result = c.run_tool(session.id, "Read", {"file_path": "README.md"})
    print(result.text, result.is_error, result.data)
"""

from agentd_client._client import (
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
    "default_socket_path",
]
