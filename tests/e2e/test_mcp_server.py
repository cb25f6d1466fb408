"""`agentctl mcp`: a session's tools over MCP on stdio, driven by the official MCP client."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import anyio
import mcp
from mcp.client.stdio import StdioServerParameters

from agentd_client import Client, PermissionAsk
from tests.support.daemon import DaemonProcess
from tests.support.data import ORACLE
from tests.support.waiting import wait_for_event


def _server(daemon: DaemonProcess, *argv: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentd_client.cli.main", "--socket", daemon.socket, "mcp", *argv],
    )


def _text(result: object) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)  # type: ignore[attr-defined]


async def test_tools_listed_read_and_a_sandboxed_bash(
    daemon: DaemonProcess, client: Client, session_id: str, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("hello from the workspace\n")
    async with mcp.Client(_server(daemon, "--session", session_id)) as m:
        tools = {t.name: t for t in (await m.list_tools()).tools}
        daemon_tools = {t["name"]: t for t in client.list_tools()}
        assert set(tools) == set(daemon_tools)
        assert tools["Read"].input_schema == daemon_tools["Read"]["input_schema"]

        read = await m.call_tool("Read", {"file_path": str(workspace / "notes.txt")})
        assert not read.is_error and "hello from the workspace" in _text(read)

        bash = await m.call_tool(
            "Bash", {"command": "echo $((6 * 7)) > answer.txt; cat answer.txt"}
        )
        assert not bash.is_error and _text(bash).strip() == "42"
        assert (workspace / "answer.txt").read_text() == "42\n"

        unknown = await m.call_tool("NoSuchTool", {})
        assert unknown.is_error and "NoSuchTool" in _text(unknown)
    # The calls are the session's, journaled like any other client's.
    names = [
        e.call_finished.name for e in _journal(client, session_id) if e.HasField("call_finished")
    ]
    assert names == ["Read", "Bash", "NoSuchTool"]


async def test_a_pdf_is_an_embedded_resource_holding_the_pdf(
    daemon: DaemonProcess, session_id: str, workspace: Path
) -> None:
    """MCP has no document block: a Read PDF comes as an embedded resource whose blob is
    the PDF (application/pdf, its file:// URI), after the text block."""
    subprocess.run(
        [sys.executable, ORACLE / "make_media.py", "pdf", workspace / "d.pdf", "2"], check=True
    )
    async with mcp.Client(_server(daemon, "--session", session_id)) as m:
        read = await m.call_tool("Read", {"file_path": str(workspace / "d.pdf")})
    assert not read.is_error
    text, resource = read.content
    assert text.text.startswith("PDF file read: ")
    assert resource.type == "resource"
    assert resource.resource.mime_type == "application/pdf"
    assert str(resource.resource.uri) == f"file://{workspace}/d.pdf"
    assert base64.b64decode(resource.resource.blob) == (workspace / "d.pdf").read_bytes()


def _journal(client: Client, session_id: str) -> list:
    last = client.get_session(session_id).last_seq
    events, stream = [], client.attach(session_id, 0)
    for e in stream:
        events.append(e)
        if e.seq >= last:
            break
    stream.cancel()
    return events


async def test_asks_reach_the_clients_attached_to_the_session(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="acceptEdits").id
    asks: list[PermissionAsk] = []

    def approve(ask: PermissionAsk) -> bool:
        asks.append(ask)
        return True

    async with mcp.Client(_server(daemon, "--session", sid)) as m:
        denied = await m.call_tool("Bash", {"command": "touch nobody.txt"})
        assert denied.is_error and "no client is attached" in _text(denied)
        with client.approver(sid, approve):
            allowed = await m.call_tool("Bash", {"command": "touch approved.txt"})
    assert not allowed.is_error, _text(allowed)
    assert [(a.tool_name, a.input["command"]) for a in asks] == [("Bash", "touch approved.txt")]
    assert (workspace / "approved.txt").exists() and not (workspace / "nobody.txt").exists()


async def test_workspace_makes_a_session_closed_when_the_client_goes(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    before = {s.id for s in client.list_sessions()}
    async with mcp.Client(_server(daemon, "--workspace", str(workspace))) as m:
        ls = await m.call_tool("LS", {"path": str(workspace)})
        assert not ls.is_error
        new = [s for s in client.list_sessions() if s.id not in before]
        assert [s.workspace_roots[0] for s in new] == [str(workspace)]
    closed = client.get_session(new[0].id)
    assert closed.closed


async def test_a_request_the_mcp_client_cancels_stops_the_call_in_the_daemon(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    async with mcp.Client(_server(daemon, "--session", session_id)) as m:
        scope = anyio.CancelScope()

        async def call() -> None:
            with scope:
                await m.call_tool("Bash", {"command": "sleep 300"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            started = await anyio.to_thread.run_sync(
                lambda: wait_for_event(client, session_id, lambda e: e.HasField("call_started"))
            )
            scope.cancel()
        after = await m.call_tool("Bash", {"command": "echo after"})
        assert _text(after).strip() == "after"
    # The cancel reaches the daemon on its own: the next call may finish first.
    sleep_id = started.call_started.tool_use_id
    finished = await anyio.to_thread.run_sync(
        lambda: wait_for_event(
            client,
            session_id,
            lambda e: (
                e.HasField("call_finished") and e.call_finished.result.tool_use_id == sleep_id
            ),
        )
    )
    assert finished.call_finished.duration_ms < 60_000, finished
    assert "interrupted" in finished.call_finished.result.content[0].text


async def test_tools_carry_annotations_and_results_their_structured_data(
    daemon: DaemonProcess, client: Client, session_id: str, workspace: Path
) -> None:
    """MCP clients see what a tool may do (readOnlyHint, destructiveHint, ...) from the
    daemon's own declaration, and get each result's structured data as well as its text."""
    (workspace / "notes.txt").write_text("one\ntwo\n")
    async with mcp.Client(_server(daemon, "--session", session_id)) as m:
        tools = {t.name: t.annotations for t in (await m.list_tools()).tools}
        read = await m.call_tool("Read", {"file_path": str(workspace / "notes.txt")})
        bash = await m.call_tool("Bash", {"command": "echo hi"})
    declared = {t["name"]: t["hints"] for t in client.list_tools(hints=True)}
    for name, a in tools.items():
        h = declared[name]
        assert a is not None, name
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
            h["read_only"], h["destructive"], h["idempotent"], h["open_world"]
        ), name  # fmt: skip
    # What the tools themselves say, as MCP clients read it.
    assert tools["Read"].read_only_hint and not tools["Read"].destructive_hint
    assert tools["Grep"].read_only_hint and tools["Glob"].read_only_hint
    assert not tools["Write"].read_only_hint and tools["Write"].destructive_hint
    assert tools["Bash"].destructive_hint and tools["Bash"].open_world_hint
    assert tools["WebFetch"].read_only_hint and tools["WebFetch"].open_world_hint
    # The Anthropic format stays as the API takes it: no hints unless asked for.
    assert "hints" not in client.list_tools()[0]
    assert read.structured_content["file"]["filePath"] == str(workspace / "notes.txt")
    assert bash.structured_content["stdout"] == "hi" and not bash.is_error
