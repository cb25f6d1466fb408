"""Several real `agentctl attach` processes on terminals of their own, as people use them.

History is shown, never prompted; an answer on one terminal withdraws the prompt on the
others and says who answered; "always" can add a narrower rule than the suggested one;
the output of a running command reaches every terminal in full.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentd_client import Client
from tests.support.daemon import DaemonProcess
from tests.support.screen import Terminal, plain_lines


@contextmanager
def attached(daemon: DaemonProcess, sid: str, *extra: str) -> Iterator[tuple[Terminal, str]]:
    """agentctl attach on a pty of its own; (it, the pty's name)."""
    with Terminal("--socket", daemon.socket, "attach", sid, *extra, cols=200) as term:
        yield term, term.tty_name


def _in_background(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(r=fn()))
    t.start()
    return t, out


def _ready(term: Terminal, client: Client, sid: str, marker: str) -> None:
    """The terminal follows live once it shows a call made now."""
    client.run_tool(sid, "Glob", {"pattern": marker})
    term.wait_for(marker)


def _asking(term: Terminal, about: str) -> str:
    """Wait for the prompt about `about`; the screen."""
    return term.wait_for(
        lambda t: (
            any(about in ln and "wants" in ln for ln in t.lines())
            and t.last_line().startswith("╰ Allow?")
        ),
        what=f"a prompt about {about}",
    )


def test_late_attach_shows_answered_requests_as_history_and_asks_only_the_open_one(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (first, _):
        _ready(first, client, sid, "first-ready")
        t, out = _in_background(
            lambda: client.run_tool(sid, "Write", {"file_path": "a.txt", "content": "a"})
        )
        _asking(first, "a.txt")
        first.send("y\n")
        t.join(30)
        assert not out["r"].is_error, out["r"].text
        # A second request stays open while the late terminal attaches.
        t, out = _in_background(
            lambda: client.run_tool(sid, "Write", {"file_path": "b.txt", "content": "b"})
        )
        _asking(first, "b.txt")
        with attached(daemon, sid) as (late, _):
            seen = _asking(late, "b.txt")
            # The answered one is history: shown with its answer, never prompted.
            assert "a.txt" in seen and ": allow (once) by" in seen
            assert sum(ln.startswith("╰ Allow?") for ln in late.lines()) == 1, seen
            assert not any("a.txt" in ln and "wants" in ln for ln in late.lines()), seen
            late.send("n\n")
            t.join(30)
            assert out["r"].is_error and "denied" in out["r"].text
            late.wait_for(": deny (once) by")
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
        codes = set()
        for term in (a, b, c):
            _asking(term, "w.txt")
            codes |= {
                ln.split("code ")[1].split()[0] for ln in term.lines() if "request, code" in ln
            }
        assert len(codes) == 1, codes  # the same request, the same code on every terminal
        # Not an answer: asked again, not taken as a deny.
        a.send("maybe\n")
        a.wait_for("answer y, n (the default) or a")
        assert a.last_line().startswith("╰ Allow?")
        a.send("y\n")
        t.join(30)
        assert not out["r"].is_error, out["r"].text
        who = f"by {os.environ.get('USER') or 'root'}@{socket.gethostname()} on {a_tty}"
        for term in (b, c):
            seen = term.wait_for(" answered allow (once) by ")
            withdrawn = [ln for ln in term.lines() if "(withdrawn: request" in ln]
            assert withdrawn and who in withdrawn[0], seen
            # Withdrawn: no prompt left, so an answer typed there now goes nowhere.
            assert not any(ln.startswith("╰ Allow?") for ln in term.lines()), seen


def test_always_can_add_a_narrower_rule(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (term, _):
        _ready(term, client, sid, "narrow-ready")
        t, out = _in_background(
            lambda: client.run_tool(sid, "Bash", {"command": "touch made-here"})
        )
        seen = term.wait_for("[y/N/a/1]:")
        assert "[a]lways adds the rule Bash(touch:*)" in seen, seen
        assert "[1] always, narrower: Bash(touch made-here)" in seen, seen
        term.send("1\n")
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
            # The call's end is shown after all its output, and says how it ended.
            term.wait_for("✓ Bash")
            written = plain_lines(term.raw)
            at = {line: i for i, line in enumerate(written)}
            for i in range(1, 401):
                assert f"line-{i}" in at, i
            end = next(i for i, ln in enumerate(written) if "✓ Bash" in ln)
            assert at["last"] < end and "exit 0" in written[end]
            # Progress is a status line, not a stream of "running" lines.
            assert not any("… running" in ln for ln in written)


def test_one_key_answers_and_the_enter_after_it_answers_nothing_else(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), permission_mode="default").id
    with attached(daemon, sid) as (term, _):
        _ready(term, client, sid, "one-key-ready")
        t, out = _in_background(lambda: client.run_tool(sid, "Bash", {"command": "touch k1"}))
        _asking(term, "touch k1")
        term.send("y")  # no Enter
        t.join(60)
        assert not out["r"].is_error, out["r"].text
        assert (workspace / "k1").exists()
        # "y" then the habitual Enter, with the next request asked at once: the Enter
        # belongs to the "y", so the next one is still asked, not denied by default.
        t1, out1 = _in_background(lambda: client.run_tool(sid, "Bash", {"command": "touch k2"}))
        _asking(term, "touch k2")
        t2, out2 = _in_background(lambda: client.run_tool(sid, "Bash", {"command": "touch k3"}))
        term.wait_for("1 more waiting")
        term.send("y\r")
        t1.join(60)
        assert not out1["r"].is_error, term.text()
        _asking(term, "touch k3")
        assert t2.is_alive()  # still asked
        term.send("n")
        t2.join(60)
        assert out2["r"].is_error and not (workspace / "k3").exists()
