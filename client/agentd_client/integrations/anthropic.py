"""agentd's tools for the anthropic SDK (agentd-client's `anthropic` extra).

Two ways to drive a model with a session's tools:

- your own loop: `tools=agentd.list_tools()` on `messages.create`, then
  `agentd.run_tools(session, reply.content)` (the SDK's ToolUseBlocks as they are:
  the model's ids kept, reads run together) and `tool_results_message(results)`;
- the SDK's tool runner: `tools=session_tools(agentd, session)` on
  `client.beta.messages.tool_runner(...)`. The runner calls tools one by one with
  their input only, so there the daemon names each call and nothing runs in
  parallel; your own loop keeps both.

Either way `agentd.approver(session, decide)` answers the permission asks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

try:
    from anthropic.lib.tools import (
        BetaAsyncBuiltinFunctionTool,
        BetaBuiltinFunctionTool,
        ToolError,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from agentd_client.core.origin import install_command

    raise ImportError(
        "agentd_client.integrations.anthropic needs the anthropic SDK: "
        + install_command("anthropic")
    ) from exc

from agentd_client.core.aio import AsyncClient
from agentd_client.core.approver import Approver, AsyncApprover, PermissionAsk
from agentd_client.core.calls import ToolResult
from agentd_client.core.client import Client

__all__ = [
    "Approver",
    "AsyncApprover",
    "AsyncSessionTool",
    "PermissionAsk",
    "SessionTool",
    "async_session_tools",
    "session_tools",
    "tool_results_message",
]


def tool_results_message(results: Iterable[ToolResult]) -> dict[str, Any]:
    """The user message that answers an assistant message's tool_use blocks."""
    return {"role": "user", "content": [r.to_tool_result_block() for r in results]}


def _content(result: ToolResult) -> list[dict[str, Any]]:
    return [b for b in result.content_blocks() if b["type"] != "text" or b["text"]]


def _answer(result: ToolResult) -> list[dict[str, Any]]:
    """What the runner sends back: the content, or a ToolError (is_error) with it."""
    content = _content(result)
    if result.is_error:
        # The blocks are the SDK's content block shapes as plain dicts, not its TypedDicts.
        raise ToolError(content or "the tool call failed")  # type: ignore[arg-type]
    return content


class SessionTool(BetaBuiltinFunctionTool):
    """One of the daemon's tools, run in one session, for the SDK's tool runner."""

    def __init__(self, client: Client, session_id: str, spec: dict[str, Any]) -> None:
        self.client = client
        self.session_id = session_id
        self.spec = spec

    def to_dict(self) -> Any:
        return dict(self.spec)

    def call(self, input: object) -> Any:
        data = input if isinstance(input, dict) else {}
        return _answer(self.client.run_tool(self.session_id, self.spec["name"], data))


class AsyncSessionTool(BetaAsyncBuiltinFunctionTool):
    """SessionTool's twin for AsyncAnthropic's tool runner."""

    def __init__(self, client: AsyncClient, session_id: str, spec: dict[str, Any]) -> None:
        self.client = client
        self.session_id = session_id
        self.spec = spec

    def to_dict(self) -> Any:
        return dict(self.spec)

    async def call(self, input: object) -> Any:
        data = input if isinstance(input, dict) else {}
        return _answer(await self.client.run_tool(self.session_id, self.spec["name"], data))


def _chosen(specs: list[dict[str, Any]], names: Iterable[str] | None) -> list[dict[str, Any]]:
    if names is None:
        return specs
    wanted = set(names)
    unknown = wanted - {s["name"] for s in specs}
    if unknown:
        raise ValueError(f"the daemon has no tool {', '.join(sorted(unknown))}")
    return [s for s in specs if s["name"] in wanted]


def session_tools(
    client: Client, session_id: str, names: Iterable[str] | None = None
) -> list[SessionTool]:
    """The daemon's tools (or those in `names`) bound to a session, for
    `client.beta.messages.tool_runner(tools=...)`."""
    return [SessionTool(client, session_id, s) for s in _chosen(client.list_tools(), names)]


async def async_session_tools(
    client: AsyncClient, session_id: str, names: Iterable[str] | None = None
) -> list[AsyncSessionTool]:
    """session_tools for AsyncAnthropic's tool runner."""
    specs = _chosen(await client.list_tools(), names)
    return [AsyncSessionTool(client, session_id, s) for s in specs]
