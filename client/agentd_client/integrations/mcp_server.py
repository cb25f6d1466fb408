"""A session's tools as an MCP server on stdio (`agentctl mcp`), with the official SDK.

Any MCP client -- Claude Code, Codex, Cursor, the Claude Agent SDK -- then runs its
tool calls through agentd: sandboxed, journaled, and asked about on the terminals
attached to the session, exactly as calls from any other client are. A failed call
is an `isError` result the model reads; stdout carries only the protocol.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from urllib.parse import quote

try:
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from agentd_client.core.origin import install_command

    raise ImportError(f"agentctl mcp needs the MCP SDK: {install_command('mcp')}") from exc

from agentd_client.core.aio import AsyncClient
from agentd_client.core.calls import DocumentBlock, ImageBlock, ToolResult, new_tool_use_id
from agentd_client.core.errors import AgentdError

INSTRUCTIONS = (
    "These tools run inside an agentd session: commands are sandboxed and confined to "
    "the session's workspace. A call that needs approval waits for a person attached to "
    "the session; if it is denied, the result says how the user can allow it."
)


def _document_uri(result: ToolResult, n: int) -> str:
    """Where an embedded document came from: the file Read read, else a name of its own."""
    data = result.data if isinstance(result.data, dict) else {}
    path = data.get("file", {}).get("filePath") if isinstance(data.get("file"), dict) else None
    if isinstance(path, str) and path.startswith("/") and n == 0:
        return "file://" + quote(path)
    return f"agentd://results/{quote(result.tool_use_id, safe='')}/document-{n + 1}"


def _content(result: ToolResult) -> list[Any]:
    """The result as MCP content: text, images, and a document (a PDF) as an embedded
    resource holding its bytes (the MCP form for binary content; Claude Code turns an
    application/pdf blob back into a document block)."""
    blocks: list[Any] = []
    documents = 0
    for b in result.content:
        if isinstance(b, ImageBlock):
            data = base64.b64encode(b.data).decode()
            blocks.append(types.ImageContent(data=data, mime_type=b.media_type))
        elif isinstance(b, DocumentBlock):
            blob = types.BlobResourceContents(
                uri=_document_uri(result, documents),
                mime_type=b.media_type,
                blob=base64.b64encode(b.data).decode(),
            )
            blocks.append(types.EmbeddedResource(resource=blob))
            documents += 1
        elif b.text:
            blocks.append(types.TextContent(text=b.text))
    return blocks


def _annotations(hints: dict[str, bool]) -> types.ToolAnnotations:
    """The daemon's hints in MCP's words. destructiveHint and idempotentHint mean something
    only for a tool that writes; MCP clients ignore them on a read-only one."""
    return types.ToolAnnotations(
        read_only_hint=hints["read_only"],
        destructive_hint=hints["destructive"],
        idempotent_hint=hints["idempotent"],
        open_world_hint=hints["open_world"],
    )


def build_server(agentd: AsyncClient, session_id: str, version: str = "") -> Server[Any]:
    """An MCP server whose tools are the daemon's, each call run in `session_id`."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        specs = await agentd.list_tools(hints=True)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=s["name"],
                    description=s["description"],
                    input_schema=s["input_schema"],
                    annotations=_annotations(s["hints"]),
                )
                for s in specs
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool_use_id = new_tool_use_id()
        try:
            result = await agentd.run_tool(
                session_id, params.name, params.arguments or {}, tool_use_id
            )
        except asyncio.CancelledError:
            # The MCP client cancelled the request: stop the call, not just our wait.
            await asyncio.shield(agentd.cancel(session_id, tool_use_id))
            raise
        except AgentdError as exc:
            text = f"agentd could not run {params.name}: {exc.details()}"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        # The structured result too (Read's file, Bash's stdout and exit code, ...), as
        # agentd's own clients get it in `data`; the text stays for clients that read it.
        structured = result.data if isinstance(result.data, dict) else None
        return types.CallToolResult(
            content=_content(result), structured_content=structured, is_error=result.is_error
        )

    return Server(
        "agentd",
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(agentd: AsyncClient, session_id: str, version: str = "") -> None:
    """Serve until the MCP client closes stdin."""
    server = build_server(agentd, session_id, version)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
