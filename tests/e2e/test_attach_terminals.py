"""Several real `agentctl attach` processes on terminals of their own, as people use them.

History is shown, never prompted; an answer on one terminal withdraws the prompt on the
others and says who answered; "always" can add a narrower rule than the suggested one;
the output of a running command reaches every terminal in full.
"""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentd_client import Client
from tests.support.ctl import AGENTCTL, OnPty
from tests.support.daemon import DaemonProcess


@contextmanager
def attached(daemon: DaemonProcess, sid: str, *extra: str) -> Iterator[tuple[OnPty, str]]:
    """agentctl attach on a pty of its own; (it, the pty's name). No preexec_fn: running
    Python in a child forked from this process, which has gRPC threads, is not safe."""
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    proc = subprocess.Popen(
        [AGENTCTL, "--socket", daemon.socket, "attach", sid, *extra],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        start_new_session=True,
        env={**env, "COLUMNS": "200"},
    )
    os.close(slave)
    term = OnPty(proc, master)
    try:
        yield term, name
    finally:
        term.close()


def _in_background(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(r=fn()))
    t.start()
    return t, out


def _ready(term: OnPty, client: Client, sid: str, marker: str) -> None:
    """The terminal follows live once it shows a call made now."""
    client.run_tool(sid, "Glob", {"pattern": marker})
    term.read_until(marker.encode())


def test_late_attach_shows_answered_requests_as_history_and_asks_only_the_open_one(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (first, _):
        _ready(first, client, sid, "first-ready")
        t, out = _in_background(
            lambda: client.run_tool(sid, "Write", {"file_path": "a.txt", "content": "a"})
        )
        first.read_until(b"[y/N/a")
        os.write(first.master, b"y\n")
        t.join(30)
        assert not out["r"].is_error, out["r"].text
        # A second request stays open while the late terminal attaches.
        t, out = _in_background(
            lambda: client.run_tool(sid, "Write", {"file_path": "b.txt", "content": "b"})
        )
        first.read_until(b"b.txt)\r\nAllow? ")
        with attached(daemon, sid) as (late, _):
            seen = late.read_until(b"b.txt)\r\nAllow? ")
            # The answered one is history: shown with its answer, never prompted.
            assert b"a.txt" in seen and b": allow (once) by" in seen
            assert seen.count(b"Allow? ") == 1, seen
            os.write(late.master, b"n\n")
            t.join(30)
            assert out["r"].is_error and "denied" in out["r"].text
            late.read_until(b": deny (once) by")
    assert not (workspace / "b.txt").exists()


def test_an_answer_on_one_terminal_withdraws_the_prompt_on_the_others(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with (
        attached(daemon, sid) as (a, a_tty),
        attached(daemon, sid) as (b, _),
        attached(daemon, sid) as (c, _),
    ):
        for i, term in enumerate((a, b, c)):
            _ready(term, client, sid, f"ready-{i}")
        t, out = _in_background(
            lambda: client.run_tool(sid, "Write", {"file_path": "w.txt", "content": "w"})
        )
        for term in (a, b, c):
            term.read_until(b"[y/N/a")
        # Not an answer: asked again, not taken as a deny.
        os.write(a.master, b"maybe\n")
        a.read_until(b"answer y, n (the default) or a")
        os.write(a.master, b"y\n")
        t.join(30)
        assert not out["r"].is_error, out["r"].text
        who = f"by {os.environ.get('USER') or 'root'}@{socket.gethostname()} on {a_tty}"
        for term in (b, c):
            term.read_until(b"(withdrawn: answered allow (once) by ")
            seen = term.read_until(b")\r\n").decode(errors="replace")
            assert who in seen, seen[-500:]
            # Withdrawn, so an answer typed there now goes nowhere.
            assert seen.count("Allow? ") == 1


def test_always_can_add_a_narrower_rule(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (term, _):
        _ready(term, client, sid, "narrow-ready")
        t, out = _in_background(
            lambda: client.run_tool(sid, "Bash", {"command": "touch made-here"})
        )
        seen = term.read_until(b"[y/N/a/1]: ")
        assert b"[a]lways adds the rule Bash(touch:*)" in seen, seen
        assert b"[1] always, narrower: Bash(touch made-here)" in seen, seen
        os.write(term.master, b"1\n")
        t.join(30)
        assert not out["r"].is_error, out["r"].text
    assert list(client.get_session(sid).allow_rules) == ["Bash(touch made-here)"]
    # The narrower rule allows that command and nothing broader.
    again = client.run_tool(sid, "Bash", {"command": "touch made-here"})
    assert not again.is_error


def test_every_terminal_gets_a_commands_output_in_full(
    daemon: DaemonProcess, client: Client, session_id: str
) -> None:
    with attached(daemon, session_id) as (a, _), attached(daemon, session_id) as (b, _):
        _ready(a, client, session_id, "out-ready-a")
        _ready(b, client, session_id, "out-ready-b")
        r = client.run_tool(
            session_id,
            "Bash",
            {"command": "for i in $(seq 1 400); do echo line-$i; done; sleep 0.6; echo last"},
        )
        assert not r.is_error
        for term in (a, b):
            # The call's end is shown after all its output.
            term.read_until("✓ Bash".encode())
            text = term.seen.decode(errors="replace").replace("\r\n", "\n")
            for i in range(1, 401):
                assert f"\nline-{i}\n" in text or f"Kline-{i}\n" in text, i
            assert "last\n" in text
            # Progress is a status line, not a stream of "running" lines.
            assert "… running" not in text
