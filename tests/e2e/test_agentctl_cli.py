"""agentctl as people and scripts use it: names and prefixes, exit codes, --json on every
command, contexts and their precedence, session gc, --version, completion."""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import pytest

from agentd_client import Client
from agentd_client.cli.tree import build_parser
from agentd_client.v1 import agentd_pb2 as pb
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """Every runnable command of the parser, by its words: ("session", "new") -> parser."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_leaves(sub, (*path, name)))
    if path and parser.get_default("func") is not None:
        found[path] = parser
    return found


def test_every_command_takes_json() -> None:
    leaves = _leaves(build_parser())
    assert ("session", "gc") in leaves and ("tasks", "stop") in leaves
    missing = [
        " ".join(words)
        for words, p in leaves.items()
        if not any("--json" in a.option_strings for a in p._actions)
    ]
    assert not missing, f"commands without --json: {missing}"


def _args_for(daemon: DaemonProcess, client: Client, workspace: Path, tmp: Path) -> dict:
    """Arguments that make each command do its real work (JSON out)."""
    sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    spare = client.create_session(str(workspace)).id
    closed = client.create_session(str(workspace)).id
    client.close_session(closed)
    task = client.run_tool(
        sid, "Bash", {"command": "sleep 73931$((0+1))", "run_in_background": True}
    ).data["backgroundTaskId"]
    driven = client.stub.StartTask(  # a task with its stdin open (exec, attach-task)
        pb.StartTaskRequest(session_id=sid, command="cat", stdin=True)
    ).task_id
    client.run_tool(sid, "Bash", {"command": "echo j > json.txt"}, "toolu_json")
    ca = tmp / "ca.pem"
    ca.write_text("not checked until used\n")
    token = tmp / "token"
    token.write_text("t\n")
    token.chmod(0o600)
    settings = workspace / ".claude" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text('{"permissions": {"allow": ["Bash(make:*)"]}}\n')
    sha = hashlib.sha256(settings.read_bytes()).hexdigest()
    return {
        ("status",): [],
        ("session", "new"): ["--workspace", str(workspace)],
        ("session", "ls"): ["--all"],
        ("session", "show"): [sid[:10]],
        ("session", "close"): [spare],
        ("session", "gc"): ["--idle", "1000d", "--dry-run"],
        ("call",): ["-s", sid, "LS", json.dumps({"path": str(workspace)})],
        ("cancel",): ["-s", sid, "toolu_not_running"],  # exit 3, and JSON still
        ("tools",): [],
        ("attach",): [closed],  # a closed session's replay ends
        ("logs",): ["-s", sid, task],
        ("tasks",): ["-s", sid],
        ("tasks", "ls"): ["-s", sid],
        ("tasks", "stop"): ["-s", sid, task],
        # --json: started, its task id printed (a --json after `--` is the command's)
        ("exec",): ["--json", sid, "--", "true"],
        ("attach-task",): ["-s", sid, driven],  # --json: its terminal, no link
        ("task-input",): ["-s", sid, driven, "--data", "x"],
        ("task-signal",): ["-s", sid, driven, "KILL"],
        ("classify",): ["ls -la"],
        ("perms",): ["-s", sid, "--allow", "Bash(ls:*)"],
        ("network",): ["-s", sid, "--allow", "example.com"],
        ("context", "add"): [
            "x", "--address", "h:1", "--ca", str(ca), "--token-file", str(token)
        ],
        ("context", "use"): ["x"],
        ("context", "ls"): [],
        ("context", "show"): [],
        ("context", "rm"): ["x"],
        ("completion",): ["bash"],
        ("trust", "ls"): [],
        ("trust", "approve"): [str(settings), "--sha256", sha],
        ("trust", "revoke"): [str(settings)],
        ("credentials",): [],
        ("mcp", "install"): ["claude-code", "--workspace", str(workspace)],
        ("ports",): [sid],
        ("checkpoints",): [sid],
        ("diff",): [sid, "toolu_json", "--stat"],
        ("restore",): [sid, "toolu_json", "--dry-run"],
        ("rewind",): [sid, "toolu_json", "--dry-run"],
        ("review",): [client.create_session(str(workspace), review=True).id],
        # No ask is pending: refused (exit 3), the error as JSON on stderr.
        ("approve",): ["-s", sid, "ABCD"],
        ("deny",): ["ABCD"],
        ("always",): ["ABCD"],
    }  # fmt: skip


def test_json_on_every_command_is_json(
    daemon: DaemonProcess, client: Client, workspace: Path, tmp_path: Path
) -> None:
    table = _args_for(daemon, client, workspace, tmp_path)
    leaves = _leaves(build_parser())
    # `agentctl mcp` speaks MCP's JSON-RPC on stdout whatever the flags:
    # tests/e2e/test_mcp_server.py
    # `agentctl agent` needs a model: its JSON Lines are tested in tests/e2e/test_agentctl_agent.py
    # `agentctl forward` serves until stopped: its JSON line, tests/e2e/test_forward.py
    untested = set(leaves) - set(table) - {("mcp",), ("agent",), ("forward",)}
    assert not untested, f"add these commands to the --json table: {sorted(untested)}"
    # HOME too: `mcp install` writes Claude Code's configuration there.
    env = {"AGENTD_CLIENT_CONFIG": str(tmp_path / "client.toml"), "HOME": str(tmp_path)}
    # context commands run in the order add, use, ls, show, rm (the table's order).
    for words, extra in table.items():
        needs_socket = words[0] != "context" and words[0] != "completion"
        head = ["--socket", daemon.socket] if needs_socket else []
        r = ctl.run(*head, *words, *extra, "--json", env=env)
        refused = {("cancel",), ("approve",), ("deny",), ("always",)}
        expected = 3 if words in refused else 0
        assert r.returncode == expected, (words, r.stdout, r.stderr)
        out = r.stdout.strip() or ("{}" if words in refused else "")
        assert out, words
        if words == ("attach",):
            values = [json.loads(line) for line in out.splitlines()]
            assert values[-1].get("session_closed") == {}, values[-1]
        else:
            json.loads(out)
        if expected:
            error = json.loads(ctl.one_line(r.stderr))
            assert error["exit_code"] == expected and error["error"]


def test_sessions_by_name_prefix_and_default(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("by name\n")
    new = ctl.run(
        "--socket", daemon.socket, "session", "new", "--name", "byname",
        "--workspace", str(workspace), "--mode", "bypassPermissions",
    )  # fmt: skip
    assert new.returncode == 0, new.stderr
    sid = new.stdout.strip()
    read = '{"file_path": "a.txt"}'
    for ref in ("byname", sid, sid[:6]):
        r = ctl.run("--socket", daemon.socket, "call", "-s", ref, "Read", read)
        assert r.returncode == 0 and r.stdout.startswith("1\tby name"), (ref, r.stderr)
    # AGENTD_SESSION is the default session of every command.
    r = ctl.run("--socket", daemon.socket, "call", "Read", read, env={"AGENTD_SESSION": "byname"})
    assert r.returncode == 0 and r.stdout.startswith("1\tby name"), r.stderr
    # With no session at all: a usage error that says how to give one.
    r = ctl.run("--socket", daemon.socket, "call", "Read", read)
    assert r.returncode == 64 and "AGENTD_SESSION" in ctl.one_line(r.stderr)
    # A second open session of that name is refused at creation.
    dup = ctl.run(
        "--socket", daemon.socket, "session", "new", "--name", "byname",
        "--workspace", str(workspace),
    )  # fmt: skip
    assert dup.returncode == 3 and "already open" in ctl.one_line(dup.stderr)
    # Unknown: refused, exit 3, one line.
    r = ctl.run("--socket", daemon.socket, "session", "show", "no-such-session")
    assert r.returncode == 3 and "no session 'no-such-session'" in ctl.one_line(r.stderr)


def test_session_ls_has_a_header(daemon: DaemonProcess, client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), name="with-header").id
    try:
        lines = ctl.run("--socket", daemon.socket, "session", "ls").stdout.splitlines()
        assert lines[0].split() == ["ID", "STATE", "CREATED", "IDLE", "NAME", "WORKSPACE"]
        row = next(line for line in lines if line.startswith(sid))
        assert row.index("with-header") == lines[0].index("NAME"), lines
    finally:
        client.close_session(sid)


def test_ambiguous_prefix_and_name_list_the_candidates(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    # Among 17 sessions two share their first hex digit.
    made: dict[str, str] = {}
    for _ in range(17):
        s = client.create_session(str(workspace))
        if s.id[0] in made:
            pair = (made[s.id[0]], s.id)
            break
        made[s.id[0]] = s.id
    prefix = pair[0][0]
    r = ctl.run("--socket", daemon.socket, "session", "show", prefix)
    assert r.returncode == 3, r.stderr
    assert "ambiguous" in r.stderr and "id prefix" in r.stderr
    assert pair[0] in r.stderr and pair[1] in r.stderr
    # A name only closed sessions share is ambiguous too (an open one is unique).
    twins = []
    for _ in range(2):
        twins.append(client.create_session(str(workspace), name="twin").id)
        client.close_session(twins[-1])
    r = ctl.run("--socket", daemon.socket, "session", "show", "twin")
    assert r.returncode == 3 and "ambiguous" in r.stderr
    assert all(t in r.stderr for t in twins)
    # With an open one, the name means the open one.
    live = client.create_session(str(workspace), name="twin").id
    r = ctl.run("--socket", daemon.socket, "session", "show", "twin")
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == live


def test_exit_codes(daemon: DaemonProcess, session_id: str, tmp_path: Path) -> None:
    gone = ctl.run("--socket", str(tmp_path / "nobody.sock"), "status")
    assert gone.returncode == 2
    assert "cannot reach agentd" in ctl.one_line(gone.stderr)
    failed = ctl.run(
        "--socket", daemon.socket, "call", "-s", session_id, "Read", '{"file_path": "x"}'
    )
    assert failed.returncode == 1
    bad_input = ctl.run("--socket", daemon.socket, "perms", "-s", session_id, "--allow", "Bash(")
    assert bad_input.returncode == 3, bad_input.stderr
    assert "INVALID_ARGUMENT" in ctl.one_line(bad_input.stderr)
    bad_mode = ctl.run("--socket", daemon.socket, "perms", "-s", session_id, "--mode", "nope")
    assert bad_mode.returncode == 64 and "invalid choice" in ctl.one_line(bad_mode.stderr)
    usage = ctl.run("--socket", daemon.socket, "session", "gc", "--idle", "soon")
    assert usage.returncode == 64 and "duration" in ctl.one_line(usage.stderr)
    assert ctl.run("no-such-command").returncode == 64
    helped = ctl.run("--help")
    assert "130" in helped.stdout and "cannot reach the daemon" in helped.stdout
    version = ctl.run("--version")
    assert version.returncode == 0 and version.stdout.startswith("agentctl ")


def _kind(event: dict) -> str:
    return next(k for k in event if k not in ("seq", "session_id", "time_ms"))


def test_attach_from_now_skips_the_past(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    client.run_tool(session_id, "LS", {"path": "/tmp"})
    last = client.get_session(session_id).last_seq
    assert last > 0
    client.close_session(session_id)  # so each attach below ends after what there is
    everything = ctl.run("--socket", daemon.socket, "attach", session_id, "--json")
    kinds = [_kind(json.loads(line)) for line in everything.stdout.splitlines()]
    assert "call_started" in kinds and kinds[-1] == "session_closed"
    after_last = ctl.run("--socket", daemon.socket, "attach", session_id, "--from", str(last))
    assert after_last.returncode == 0, after_last.stderr
    assert after_last.stdout.strip().endswith("session closed")
    header, *shown = after_last.stdout.strip().splitlines()
    assert header.startswith("attached to session ") and len(shown) == 1, after_last.stdout
    now = ctl.run("--socket", daemon.socket, "attach", session_id, "--from", "now", "--json")
    assert now.returncode == 0 and now.stdout == "", now.stdout


def test_session_gc_closes_only_the_idle(tmp_path: Path, workspace: Path) -> None:
    # A daemon of its own: gc --idle 0s closes every idle session it can see.
    daemon = start_daemon(tmp_path / "gc")
    try:
        with Client(daemon.socket, timeout=60) as client:
            _gc(daemon, client, workspace)
    finally:
        assert daemon.stop() == 0, daemon.log


def _gc(daemon: DaemonProcess, client: Client, workspace: Path) -> None:
    idle = client.create_session(str(workspace), name="gc-idle").id
    # Every session is idle for at least 0s; the busy one has a running task.
    busy = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    before_ms = time.time() * 1000
    client.run_tool(busy, "Bash", {"command": "sleep 73941$((0+1))", "run_in_background": True})
    # The daemon reports activity: the call just made, not the session's creation.
    activity = {s.id: s.last_activity_ms for s in client.list_sessions()}
    assert activity[idle] <= before_ms <= activity[busy]
    dry = ctl.run("--socket", daemon.socket, "session", "gc", "--idle", "0s", "--dry-run", "--json")
    report = json.loads(dry.stdout)
    actions = {c["id"]: c for c in report["sessions"]}
    assert actions[idle]["action"] == "closed" and report["dry_run"]
    assert actions[busy]["action"] == "kept" and "running task" in actions[busy]["reason"]
    assert not client.get_session(idle).closed
    real = ctl.run("--socket", daemon.socket, "session", "gc", "--idle", "0s")
    assert real.returncode == 0, real.stderr
    assert f"closed {idle}" in real.stdout
    assert client.get_session(idle).closed
    assert not client.get_session(busy).closed
    # The daemon's default idle time (7d) keeps what was just used; the closed session
    # is within its retention, so it stays too.
    fresh = client.create_session(str(workspace)).id
    kept = json.loads(ctl.run("--socket", daemon.socket, "session", "gc", "--json").stdout)
    assert {c["id"]: c["action"] for c in kept["sessions"]} == {
        idle: "kept",
        busy: "kept",
        fresh: "kept",
    }
    # --reap-after 0 deletes what the closed session left, rows included.
    reaped = ctl.run("--socket", daemon.socket, "session", "gc", "--reap-after", "0")
    assert f"reaped {idle}" in reaped.stdout, reaped.stdout
    assert idle not in {s.id for s in client.list_sessions(include_closed=True)}
    assert busy in {s.id for s in client.list_sessions()}
    client.close_session(busy)


def test_context_precedence(daemon: DaemonProcess, tmp_path: Path) -> None:
    env = {"AGENTD_CLIENT_CONFIG": str(tmp_path / "client.toml")}
    r = ctl.run("context", "add", "local", "--socket", daemon.socket, env=env)
    assert r.returncode == 0, r.stderr
    # The only context becomes the current one: plain `agentctl status` uses it.
    assert ctl.run("status", env=env).returncode == 0
    ctl.run("context", "add", "dead", "--socket", str(tmp_path / "dead.sock"), "--use", env=env)
    assert ctl.run("status", env=env).returncode == 2
    # --context beats the current context, and the environment.
    env_dead = {**env, "AGENTD_SOCKET": str(tmp_path / "dead.sock")}
    assert ctl.run("--context", "local", "status", env=env_dead).returncode == 0
    # The environment beats the current context; a flag beats both.
    env_live = {**env, "AGENTD_SOCKET": daemon.socket}
    assert ctl.run("status", env=env_live).returncode == 0
    flagged = ctl.run("--socket", str(tmp_path / "dead.sock"), "status", env=env_live)
    assert flagged.returncode == 2
    # AGENTD_CONTEXT picks a context for a shell, over the current one.
    assert ctl.run("status", env={**env, "AGENTD_CONTEXT": "local"}).returncode == 0
    # Connection options work after the command too.
    assert ctl.run("status", "--context", "local", env=env).returncode == 0
    shown = json.loads(ctl.run("context", "show", "--json", "--context", "local", env=env).stdout)
    assert shown["socket"] == daemon.socket and shown["context"] == "local"
    unknown = ctl.run("--context", "nope", "status", env=env)
    assert unknown.returncode == 2 and "no context 'nope'" in ctl.one_line(unknown.stderr)
    missing = ctl.run("context", "add", "y", "--address", "h:1", "--token-file", "/nope", env=env)
    assert missing.returncode == 64 and "/nope" in ctl.one_line(missing.stderr)


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_comes_from_the_parser(shell: str) -> None:
    r = ctl.run("completion", shell)
    assert r.returncode == 0, r.stderr
    for word in ("attach", "session", "gc", "--from", "--context"):
        assert word in r.stdout, word


def test_call_shows_a_document_as_what_it_is(
    daemon: DaemonProcess, session_id: str, workspace: Path
) -> None:
    """`agentctl call Read` of a PDF: its text line, then the document said, not dumped;
    --json has the Messages API's document block."""
    import subprocess
    import sys

    from tests.support.data import ORACLE

    pdf = workspace / "d.pdf"
    subprocess.run([sys.executable, ORACLE / "make_media.py", "pdf", pdf, "2"], check=True)
    shown = ctl.run(
        "--socket", daemon.socket, "call", "-s", session_id, "Read", '{"file_path": "d.pdf"}'
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-2:] == [
        f"PDF file read: {pdf} (856 bytes)",
        "[document application/pdf, 856 bytes]",
    ]
    raw = ctl.run(
        "--socket",
        daemon.socket,
        "call",
        "--json",
        "-s",
        session_id,
        "Read",
        '{"file_path": "d.pdf"}',
    )
    document = json.loads(raw.stdout)["content"][1]
    assert document["type"] == "document" and document["source"]["media_type"] == "application/pdf"
