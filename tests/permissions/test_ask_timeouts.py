"""How long an ask waits, through the real daemon: the daemon's default, a session's own
(set when it is made, changed by `perms`, kept across a restart), a call's own; each
checked against its bounds with an error that says them."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon


def _ask(client: Client, sid: str, *, answer: bool, **call: Any) -> tuple[Any, Any, Any]:
    """A Write that asks, with a client attached: (the request, how it was resolved, the
    result). `answer`: deny it at once (else it waits for its timeout)."""
    stream = client.attach(sid, client.get_session(sid).last_seq)  # this ask's events only
    seen: dict[str, Any] = {}
    done = threading.Event()

    def follow() -> None:
        for e in stream:
            kind = e.WhichOneof("kind")
            if kind == "permission_requested":
                seen["requested"] = e
                if answer:
                    client.resolve_permission(sid, e.permission_requested.request_id, "deny")
            elif kind == "permission_resolved":
                seen["resolved"] = e.permission_resolved
                done.set()
                return

    assert stream.wait_attached()
    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        result = client.run_tool(sid, "Write", {"file_path": "t.txt", "content": "x"}, **call)
        assert done.wait(60)
    finally:
        stream.cancel()
    return seen["requested"], seen["resolved"], result


def _waits_ms(requested: Any) -> int:
    """How long the ask said it would wait: its expiry less the time it was made."""
    return int(requested.permission_requested.expires_ms - requested.time_ms)


def test_a_session_ask_timeout_denies_after_it(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default", ask_timeout=1).id
    assert client.get_session(sid).ask_timeout_seconds == 1
    requested, resolved, result = _ask(client, sid, answer=False)
    assert abs(_waits_ms(requested) - 1000) < 500
    assert (resolved.decision, resolved.decided_by) == ("deny", "timeout")
    assert result.is_error
    assert not (workspace / "t.txt").exists()


def test_a_call_ask_timeout_wins_over_the_session(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default", ask_timeout=3600).id
    requested, _, _ = _ask(client, sid, answer=True)
    assert abs(_waits_ms(requested) - 3_600_000) < 5000
    requested, resolved, result = _ask(client, sid, answer=False, ask_timeout=1)
    assert abs(_waits_ms(requested) - 1000) < 500
    assert resolved.decided_by == "timeout" and result.is_error


def test_perms_changes_it_and_zero_is_the_daemon_default(client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    assert client.get_session(sid).ask_timeout_seconds == 0
    default_ms = _waits_ms(_ask(client, sid, answer=True)[0])
    assert client.update_permissions(sid, ask_timeout=2).ask_timeout_seconds == 2
    assert abs(_waits_ms(_ask(client, sid, answer=True)[0]) - 2000) < 500
    # Changing rules leaves it as it is; 0 gives the daemon's default back.
    assert client.update_permissions(sid, allow=["Bash(ls:*)"]).ask_timeout_seconds == 2
    assert client.update_permissions(sid, ask_timeout=0).ask_timeout_seconds == 0
    assert abs(_waits_ms(_ask(client, sid, answer=True)[0]) - default_ms) < 500


@pytest.mark.parametrize("seconds", [0.5, 86401, -1, float("nan"), float("inf")])
def test_out_of_bounds_is_refused_with_the_bounds(
    client: Client, workspace: Path, session_id: str, seconds: float
) -> None:
    attempts = (
        lambda: client.create_session(str(workspace), ask_timeout=seconds),
        lambda: client.update_permissions(session_id, ask_timeout=seconds),
        lambda: client.run_tool(session_id, "Glob", {"pattern": "*"}, ask_timeout=seconds),
    )
    for attempt in attempts:
        with pytest.raises(grpc.RpcError) as raised:
            attempt()
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "1s to 24h" in (raised.value.details() or "")
    assert client.get_session(session_id).ask_timeout_seconds == 0


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-asktimeout-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_session_ask_timeout_survives_a_restart(base: Path, workspace: Path) -> None:
    first = start_daemon(base)
    with Client(first.socket) as c:
        made = c.create_session(str(workspace), ask_timeout=90).id
        changed = c.create_session(str(workspace)).id
        c.update_permissions(changed, ask_timeout=600)
    assert first.stop() == 0
    second = start_daemon(base)
    try:
        with Client(second.socket) as c:
            assert c.get_session(made).ask_timeout_seconds == 90
            assert c.get_session(changed).ask_timeout_seconds == 600
    finally:
        second.stop()


def test_agentctl_sets_it_for_a_session_and_a_call(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    made = ctl.run(
        "--socket", daemon.socket, "session", "new", "--workspace", str(workspace),
        "--ask-timeout", "10m", "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout)["id"]
    assert client.get_session(sid).ask_timeout_seconds == 600
    r = ctl.run("--socket", daemon.socket, "perms", "-s", sid, "--ask-timeout", "90s")
    assert r.returncode == 0, r.stderr
    assert "asks wait 90s" in r.stdout, r.stdout
    j = ctl.run("--socket", daemon.socket, "perms", "-s", sid, "--json")
    assert json.loads(j.stdout)["ask_timeout_seconds"] == 90
    bad = ctl.run("--socket", daemon.socket, "perms", "-s", sid, "--ask-timeout", "2d")
    assert bad.returncode != 0 and "1s to 24h" in bad.stderr, bad.stderr
    call = ctl.run(
        "--socket", daemon.socket, "call", "-s", sid, "--ask-timeout", "5s", "Glob",
        '{"pattern": "*"}',
    )  # fmt: skip
    assert call.returncode == 0, call.stderr
    bad_call = ctl.run(
        "--socket", daemon.socket, "call", "-s", sid, "--ask-timeout", "0.1", "Glob",
        '{"pattern": "*"}',
    )  # fmt: skip
    assert bad_call.returncode != 0 and "1s to 24h" in bad_call.stderr, bad_call.stderr
