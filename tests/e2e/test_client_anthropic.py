"""The anthropic SDK against a fake Messages API, with the session's tools run by agentd.

The fake API (tests/data/oracle/fake_api.py) scripts the model: three reads in one
turn, an edit, then a Bash call that needs approval; it records every tool_result it
is sent. The loop is the README's, word for word in substance: `run_tools` on the
SDK's ToolUseBlocks, `to_tool_result_block()`, and an approver in place before the
first call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import pytest

from agentd_client import AsyncClient, Client, PermissionAsk
from agentd_client.integrations.anthropic import (
    async_session_tools,
    session_tools,
    tool_results_message,
)
from tests.support import data
from tests.support.daemon import DaemonProcess

FAKE_API = data.FAKE_API
MODEL = "claude-fake-1"


@dataclass
class FakeAPI:
    url: str
    record: Path

    def results(self) -> list[dict]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [r for r in map(json.loads, lines) if r.get("kind") == "tool_result"]


def _script(workspace: Path) -> list[list[dict]]:
    a, b = str(workspace / "a.txt"), str(workspace / "b.txt")
    return [
        [
            {"name": "Read", "input": {"file_path": a}},
            {"name": "Read", "input": {"file_path": b}},
            {"name": "Glob", "input": {"pattern": "*.txt"}},
        ],
        [{"name": "Edit", "input": {"file_path": a, "old_string": "alpha", "new_string": "ALPHA"}}],
        [{"name": "Bash", "input": {"command": "touch made.txt"}}],
    ]


@pytest.fixture
def fake_api(tmp_path: Path, workspace: Path) -> Iterator[FakeAPI]:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script(workspace)))
    record = tmp_path / "record.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_API), "--script", str(script), "--record", str(record)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield FakeAPI(f"http://127.0.0.1:{int(line.split()[1])}", record)
    finally:
        proc.terminate()
        proc.wait(10)


def _approve_bash(asks: list[PermissionAsk]):
    def decide(ask: PermissionAsk) -> bool:
        asks.append(ask)
        return ask.tool_name == "Bash"

    return decide


def _check_outcome(workspace: Path, api: FakeAPI, asks: list[PermissionAsk]) -> list[dict]:
    results = api.results()
    assert [r["tool_use_id"] for r in results] == [f"toolu_oracle_{n:04d}" for n in range(1, 6)]
    assert all(not r["is_error"] for r in results), results
    text = [json.dumps(r["content"]) for r in results]
    assert "alpha" in text[0] and "beta" in text[1] and "a.txt" in text[2]
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "made.txt").exists()
    assert [(a.tool_name, a.input.get("command")) for a in asks] == [("Bash", "touch made.txt")]
    return results


def test_the_readme_loop_runs_the_model_s_calls_with_its_ids(
    daemon: DaemonProcess, workspace: Path, fake_api: FakeAPI
) -> None:
    asks: list[PermissionAsk] = []
    # --- the README's example, pointed at the fake API and the test daemon ---
    claude = anthropic.Anthropic(base_url=fake_api.url, api_key="test")
    agentd = Client(daemon.socket)
    session = agentd.create_session(str(workspace), permission_mode="acceptEdits").id
    messages = [{"role": "user", "content": "Make made.txt and shout alpha."}]
    with agentd.approver(session, _approve_bash(asks)):
        while True:
            reply = claude.messages.create(
                model=MODEL, max_tokens=4096, tools=agentd.list_tools(), messages=messages
            )
            messages.append({"role": "assistant", "content": reply.content})
            if reply.stop_reason != "tool_use":
                break
            messages.append(tool_results_message(agentd.run_tools(session, reply.content)))
    # ---
    assert reply.content[-1].text == "Done."
    _check_outcome(workspace, fake_api, asks)
    # The daemon ran the calls under the model's ids, so its journal and the
    # conversation name the same calls.
    started = _started_ids(agentd, session)
    assert started == [f"toolu_oracle_{n:04d}" for n in range(1, 6)]
    agentd.close()


def _started_ids(agentd: Client, session: str) -> list[str]:
    """The ids of the session's tool calls, from its journal."""
    last = agentd.get_session(session).last_seq
    ids = []
    stream = agentd.attach(session, 0)
    for e in stream:
        if e.HasField("call_started"):
            ids.append(e.call_started.tool_use_id)
        if e.seq >= last:
            break
    stream.cancel()
    return ids


def test_the_sdk_tool_runner_with_session_tools(
    daemon: DaemonProcess, workspace: Path, fake_api: FakeAPI
) -> None:
    asks: list[PermissionAsk] = []
    claude = anthropic.Anthropic(base_url=fake_api.url, api_key="test")
    with Client(daemon.socket) as agentd:
        session = agentd.create_session(str(workspace), permission_mode="acceptEdits").id
        runner = claude.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=4096,
            thread=False,  # the fake API keeps no server-side threads
            tools=session_tools(agentd, session),
            messages=[{"role": "user", "content": "Make made.txt and shout alpha."}],
        )
        with agentd.approver(session, _approve_bash(asks)):
            final = runner.until_done()
    assert final.content[-1].text == "Done."
    _check_outcome(workspace, fake_api, asks)


async def test_the_async_tool_runner_with_an_async_approver(
    daemon: DaemonProcess, workspace: Path, fake_api: FakeAPI
) -> None:
    asks: list[PermissionAsk] = []

    async def decide(ask: PermissionAsk) -> str:
        asks.append(ask)
        return "allow" if ask.tool_name == "Bash" else "deny"

    claude = anthropic.AsyncAnthropic(base_url=fake_api.url, api_key="test")
    async with AsyncClient(daemon.socket) as agentd:
        session = (await agentd.create_session(str(workspace), permission_mode="acceptEdits")).id
        runner = claude.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=4096,
            thread=False,  # the fake API keeps no server-side threads
            tools=await async_session_tools(agentd, session),
            messages=[{"role": "user", "content": "Make made.txt and shout alpha."}],
        )
        async with agentd.approver(session, decide):
            final = await runner.until_done()
    assert final.content[-1].text == "Done."
    _check_outcome(workspace, fake_api, asks)


def test_without_an_approver_the_ask_is_denied_and_the_model_is_told(
    daemon: DaemonProcess, workspace: Path, fake_api: FakeAPI
) -> None:
    claude = anthropic.Anthropic(base_url=fake_api.url, api_key="test")
    with Client(daemon.socket) as agentd:
        session = agentd.create_session(str(workspace), permission_mode="acceptEdits").id
        messages = [{"role": "user", "content": "go"}]
        while True:
            reply = claude.messages.create(
                model=MODEL, max_tokens=4096, tools=agentd.list_tools(), messages=messages
            )
            messages.append({"role": "assistant", "content": reply.content})
            if reply.stop_reason != "tool_use":
                break
            messages.append(tool_results_message(agentd.run_tools(session, reply.content)))
    bash = fake_api.results()[-1]
    assert bash["tool_use_id"] == "toolu_oracle_0005" and bash["is_error"] is True
    assert "no client is attached" in json.dumps(bash["content"])
    assert not (workspace / "made.txt").exists()


def test_a_pdf_reaches_the_model_as_a_document_block(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    """Read of a PDF through the SDK's tool runner: the tool_result the API receives holds
    the PDF itself, `{"type": "document", "source": {"type": "base64", "media_type":
    "application/pdf", …}}`, as the reference sends it."""
    import base64

    subprocess.run(
        [sys.executable, data.ORACLE / "make_media.py", "pdf", workspace / "d.pdf", "2"],
        check=True,
    )
    script = tmp_path / "pdf-script.json"
    script.write_text(json.dumps([[{"name": "Read", "input": {"file_path": "d.pdf"}}]]))
    record = tmp_path / "pdf-record.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_API), "--script", str(script), "--record", str(record)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test")
        with Client(daemon.socket) as agentd:
            session = agentd.create_session(str(workspace)).id
            runner = claude.beta.messages.tool_runner(
                model=MODEL,
                max_tokens=4096,
                thread=False,
                tools=session_tools(agentd, session),
                messages=[{"role": "user", "content": "Read d.pdf."}],
            )
            runner.until_done()
    finally:
        proc.terminate()
        proc.wait(10)
    (result,) = FakeAPI("", record).results()
    head, document = result["content"]
    assert head["type"] == "text" and head["text"].startswith("PDF file read: ")
    assert document["type"] == "document"
    assert document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]) == (workspace / "d.pdf").read_bytes()
