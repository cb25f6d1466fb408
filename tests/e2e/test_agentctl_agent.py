"""`agentctl agent` end to end: the real agentctl, the real anthropic SDK against the
project's fake Messages API (tests/support/fake_messages.py), the real daemon, and `agentctl
attach` on a real pty answering the one ask.

The script: the model says a line and reads three files at once, edits one, says a
line and runs a Bash command that asks, then (after a resume from another process)
reads what the command made. The first process stops at its turn limit, after running
that turn's Bash; the second rebuilds the conversation from the session's journal.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from agentd_client import Client
from agentd_client.integrations import conversation as conv
from tests.support import ctl
from tests.support.daemon import DaemonProcess
from tests.support.fake_messages import FakeAPI, running

PROMPT = "Shout alpha and make made.txt."
RESUMED = "Now check that made.txt is there."


def _env(api: FakeAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url}


def _script(ws: Path) -> list[list[dict[str, Any]]]:
    a, b = str(ws / "a.txt"), str(ws / "b.txt")
    return [
        [
            {"text": "Let me look at both files.\nReading them now."},
            {"name": "Read", "input": {"file_path": a}},
            {"name": "Read", "input": {"file_path": b}},
            {"name": "Glob", "input": {"pattern": "*.txt"}},
        ],
        [{"name": "Edit", "input": {"file_path": a, "old_string": "alpha", "new_string": "ALPHA"}}],
        [
            {"text": "Making the file."},
            {"name": "Bash", "input": {"command": "touch made.txt"}},
        ],
        [{"name": "Read", "input": {"file_path": str(ws / "made.txt")}}],
    ]


def _uncached(value: Any) -> Any:
    """A request's messages without the cache breakpoints (they move every turn)."""
    value = copy.deepcopy(value)
    for m in value:
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                b.pop("cache_control", None)
    return value


def _agent_events(client: Client, sid: str) -> list[Any]:
    return [e for e in conv.session_events(client, sid) if e.HasField("agent")]


def test_agent_runs_watched_and_approved_from_a_pty_then_resumes_elsewhere(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    made = ctl.run("--socket", daemon.socket, "session", "new", "--workspace", str(workspace),
                   "--mode", "acceptEdits")  # fmt: skip
    assert made.returncode == 0, made.stderr
    sid = made.stdout.strip()
    watcher = ctl.on_pty("--socket", daemon.socket, "attach", sid)
    try:
        # The watcher is attached once it shows an event of the session.
        client.run_tool(sid, "Glob", {"pattern": "nothing-*"})
        watcher.read_until(b"Glob")
        with running(_script(workspace), tmp_path / "api") as api:
            first = ctl.popen("--socket", daemon.socket, "agent", "--session", sid,
                              "--max-turns", "3", PROMPT, env=_env(api))  # fmt: skip
            # The streamed text reaches the other terminal before the ask does.
            seen = watcher.read_until(b"[y/N/a")
            assert b"Let me look at both files." in seen and b"Making the file." in seen
            assert b"touch made.txt" in seen
            os.write(watcher.master, b"y\n")
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0, err
            assert "Let me look at both files.\nReading them now." in out
            assert "agent stopped (max_turns)" in err, err
            # Another process, knowing only the session, continues the conversation.
            second = ctl.run("--socket", daemon.socket, "agent", "--resume", sid, RESUMED,
                             env=_env(api))  # fmt: skip
            assert second.returncode == 0, second.stderr
            assert "Done." in second.stdout
            assert "agent stopped (end_turn)" in second.stderr
            watcher.read_until(b"agent stopped (end_turn)")
            requests = api.requests()
            results = api.results()
    finally:
        watcher.close()

    # What the fake API received: every call's result under the model's id, none failed.
    ids = [f"toolu_oracle_{n:04d}" for n in range(1, 7)]
    assert [r["tool_use_id"] for r in results] == ids
    assert all(not r["is_error"] for r in results), results
    texts = [json.dumps(r["content"]) for r in results]
    assert "alpha" in texts[0] and "beta" in texts[1] and "a.txt" in texts[2]
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "made.txt").exists()
    # Prompt caching: the tools and the system prompt carry the breakpoints.
    assert len(requests) == 5  # three turns, then two after the resume
    for body in requests:
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in t for t in body["tools"][:-1])
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["stream"] is True
    # The resume sent the conversation as the first process had it, then the Bash
    # call's result (rebuilt from the journal) with the new words in the same message.
    before, after = _uncached(requests[2]["messages"]), _uncached(requests[3]["messages"])
    assert after[: len(before)] == before
    assistant, user = after[len(before) :]
    assert [b.get("id") for b in assistant["content"]] == [None, "toolu_oracle_0005"]
    assert user["content"][0]["tool_use_id"] == "toolu_oracle_0005"
    assert "is_error" not in user["content"][0]
    assert user["content"][1] == {"type": "text", "text": RESUMED}

    # The session holds the conversation: one id, prompts, messages, stops.
    events = _agent_events(client, sid)
    kinds = [e.agent.WhichOneof("kind") for e in events]
    assert kinds == ["prompt", "message", "message", "message", "stopped",
                     "prompt", "message", "message", "stopped"]  # fmt: skip
    assert len({e.agent.conversation_id for e in events}) == 1
    assert [e.agent.stopped.reason for e in events if e.agent.HasField("stopped")] == [
        "max_turns",
        "end_turn",
    ]
    first_message = events[1].agent.message
    assert first_message.content[0].text.startswith("Let me look")
    assert [b.id for b in first_message.content[1:]] == ids[:3]
    # The three reads ran as one batch: all started before any finished.
    journal = conv.session_events(client, sid)
    started = [e.seq for e in journal if e.HasField("call_started")
               and e.call_started.tool_use_id in ids[:3]]  # fmt: skip
    finished = [e.seq for e in journal if e.HasField("call_finished")
                and e.call_finished.result.tool_use_id in ids[:3]]  # fmt: skip
    assert len(started) == 3 and max(started) < min(finished)
    # A rebuild now gives exactly what the last request held, plus the final answer.
    rebuilt = conv.rebuild(journal)
    assert rebuilt is not None and rebuilt.turns == 5 and rebuilt.ended
    assert rebuilt.messages[:-1] == _uncached(requests[4]["messages"])
    assert rebuilt.messages[-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Done."}]}  # fmt: skip


def test_a_budget_stops_the_loop_and_json_lines_say_why(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    script = [[{"name": "Read", "input": {"file_path": str(workspace / "a.txt")}}]] * 1
    # Settings from the client config's [agent] table; flags win over them.
    config = tmp_path / "client.toml"
    config.write_text('[agent]\nmodel = "claude-test-9"\nmax_tokens = 77\nsystem = "Long."\n')
    with running(script, tmp_path / "api") as api:
        env = {**_env(api), "AGENTD_CLIENT_CONFIG": str(config)}
        r = ctl.run("--socket", daemon.socket, "agent", "--json", "--workspace", str(workspace),
                    "--budget", "5", "--system", "Be terse.", "--max-tokens", "123", "read it",
                    env=env)  # fmt: skip
        requests = api.requests()
        results = api.results()
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    last = lines[-1]
    assert last["stopped"]["reason"] == "budget" and last["stopped"]["turns"] == 1
    assert last["session_id"]
    # The turn's tool ran before the stop, so a resume finds it answered.
    assert [x["tool_result"]["tool_use_id"] for x in lines if "tool_result" in x] == [
        "toolu_oracle_0001"
    ]
    assert results == []  # ... though the model was not asked again
    (body,) = requests
    assert body["model"] == "claude-test-9" and body["max_tokens"] == 123
    assert body["system"][0]["text"] == "Be terse."


def test_ctrl_c_cancels_the_running_call_and_exits_130(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    script = [[{"name": "Bash", "input": {"command": "sleep 60"}}]]
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    with running(script, tmp_path / "api") as api:
        term = ctl.on_pty("--socket", daemon.socket, "agent", "--session", sid, "wait",
                          env=_env(api))  # fmt: skip
        try:
            term.read_until(b"Bash")
            # The call is running once the daemon says so.
            stream = client.attach(sid, 0)
            for e in stream:
                if e.HasField("call_started") and e.call_started.name == "Bash":
                    break
            stream.cancel()
            term.proc.send_signal(signal.SIGINT)
            assert term.proc.wait(30) == 130
            seen = term.drain()
        finally:
            term.close()
    assert b"agent stopped (interrupted" in seen, seen
    journal = conv.session_events(client, sid)
    (bash,) = [e.call_finished for e in journal if e.HasField("call_finished")]
    assert bash.result.is_error
    agent = [e.agent for e in journal if e.HasField("agent")]
    assert [a.stopped.reason for a in agent if a.HasField("stopped")] == ["interrupted"]
    # A resume answers the call with what the daemon recorded of it.
    rebuilt = conv.rebuild(journal)
    assert rebuilt is not None
    answer = rebuilt.messages[-1]["content"][0]
    assert answer["tool_use_id"] == "toolu_oracle_0001" and answer["is_error"] is True


def test_ctrl_c_while_the_model_answers_stops_at_once(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    # The fake model takes a minute to answer; Ctrl-C must not wait for it.
    script = [[{"sleep": 60}, {"name": "LS", "input": {"path": str(workspace)}}]]
    sid = client.create_session(str(workspace)).id
    with running(script, tmp_path / "api") as api:
        proc = ctl.popen("--socket", daemon.socket, "agent", "--json", "--session", sid, "wait",
                         env=_env(api))  # fmt: skip
        try:
            stream = client.attach(sid, 0)
            for e in stream:  # the prompt is recorded before the model is asked
                if e.HasField("agent") and e.agent.HasField("prompt"):
                    break
            stream.cancel()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 130
    assert json.loads(out.splitlines()[-1])["stopped"]["reason"] == "interrupted"


class _Refuses(BaseHTTPRequestHandler):
    """An API that refuses the key (401, which the SDK does not retry)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"type":"error","error":{"type":"authentication_error","message":"bad key"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_errors_are_one_line_with_their_exit_codes(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace)).id
    no_key = ctl.run("--socket", daemon.socket, "agent", "--session", sid, "go",
                     env={"ANTHROPIC_API_KEY": ""})  # fmt: skip
    assert no_key.returncode == 64 and "ANTHROPIC_API_KEY" in ctl.one_line(no_key.stderr)
    config = workspace.parent / f"{workspace.name}.toml"
    config.write_text("[agent]\nmax_turns = 'many'\n")
    try:
        env = {"ANTHROPIC_API_KEY": "k", "AGENTD_CLIENT_CONFIG": str(config)}
        bad = ctl.run("--socket", daemon.socket, "agent", "--session", sid, "go", env=env)
    finally:
        config.unlink()
    assert bad.returncode == 64 and "max_turns must be an integer" in ctl.one_line(bad.stderr)
    server = HTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        key = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url}
        nothing = ctl.run("--socket", daemon.socket, "agent", "--resume", sid, "go", env=key)
        assert nothing.returncode == 3 and "no agent conversation" in ctl.one_line(nothing.stderr)
        refused = ctl.run("--socket", daemon.socket, "agent", "--json", "--session", sid, "go",
                          env=key)  # fmt: skip
    finally:
        server.shutdown()
    assert refused.returncode == 4, refused.stderr
    error = json.loads(ctl.one_line(refused.stderr))
    assert error["exit_code"] == 4 and "bad key" in error["error"]
    stops = [e.agent.stopped for e in _agent_events(client, sid) if e.agent.HasField("stopped")]
    assert [s.reason for s in stops] == ["error"]


def test_the_default_model_is_current() -> None:
    """The SDK's own table says which models retire: the default is none of them, and
    a model the SDK knows."""
    import typing

    from anthropic.types.model_param import ModelParam

    from agentd_client.integrations.agent import DEFAULT_MODEL, retirement

    assert retirement(DEFAULT_MODEL) is None
    known = typing.get_args(typing.get_args(ModelParam)[0])
    assert DEFAULT_MODEL in known


def test_a_deprecated_model_is_one_line_on_the_terminal(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    from anthropic._data import DEPRECATED_MODELS

    retiring, end = next(iter(DEPRECATED_MODELS.items()))
    sid = client.create_session(str(workspace)).id
    with running([], tmp_path / "api") as api:
        config = tmp_path / "client.toml"
        config.write_text(f'[agent]\nmodel = "{retiring}"\n')
        env = {**_env(api), "AGENTD_CLIENT_CONFIG": str(config)}
        term = ctl.on_pty("--socket", daemon.socket, "agent", "-s", sid, "hi", env=env)
        try:
            assert term.proc.wait(60) == 0
            seen = term.drain().decode()
        finally:
            term.close()
        # and the same from a flag, with --json: the warning as one JSON object on stderr
        flagged = ctl.run("--socket", daemon.socket, "agent", "-s", sid, "--model", retiring,
                          "--json", "again", env=_env(api))  # fmt: skip
        current = ctl.run("--socket", daemon.socket, "agent", "-s", sid, "once more",
                          env=_env(api))  # fmt: skip
        models = [body["model"] for body in api.requests()]
    warned = [line for line in seen.splitlines() if "deprecated" in line]
    assert len(warned) == 1, seen
    assert retiring in warned[0] and end in warned[0] and str(config) in warned[0]
    assert "Please migrate" not in seen and "Warning" not in seen  # not the SDK's own lines
    assert flagged.returncode == 0, flagged.stderr
    (line,) = [json.loads(x) for x in flagged.stderr.splitlines() if x.startswith("{")]
    assert retiring in line["warning"] and end in line["warning"]
    assert current.returncode == 0 and "deprecated" not in current.stderr, current.stderr
    assert models[:2] == [retiring, retiring] and models[2] not in DEPRECATED_MODELS
