"""An ask answered from another shell or a script: `agentctl approve|deny|always CODE`,
the code every attached terminal shows; through the real daemon, while a terminal (here
an attach stream) is attached so the daemon asks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentd_client import Client
from agentd_client.terminal.display import request_code
from tests.support import ctl
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_for_event


@contextmanager
def _call_in_background(client: Client, sid: str, command: str) -> Iterator[dict[str, Any]]:
    """A Bash call that waits on its ask while the test answers it."""
    box: dict[str, Any] = {}

    def run() -> None:
        box["result"] = client.run_tool(sid, "Bash", {"command": command})

    listener = client.attach(sid)  # someone attached: the daemon asks instead of denying
    listener.wait_attached()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        yield box
    finally:
        worker.join(120)
        listener.cancel()


def _ask_code(client: Client, sid: str) -> str:
    event = wait_for_event(client, sid, lambda e: e.HasField("permission_requested"))
    return request_code(event.permission_requested.request_id)


def test_approve_by_code_from_another_shell(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    sid = client.create_session(str(workspace), name="asks-approve").id
    with _call_in_background(client, sid, "touch approved.txt") as box:
        code = _ask_code(client, sid)
        r = ctl.run("--socket", daemon.socket, "approve", code.lower())
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"allowed {code} (Bash: "), r.stdout
    assert not box["result"].is_error, box["result"].text
    assert (workspace / "approved.txt").exists()
    # Answered: the code no longer names a pending ask.
    again = ctl.run("--socket", daemon.socket, "approve", code)
    assert again.returncode == 3 and f"no pending ask with code {code}" in again.stderr


def test_deny_and_always_by_code(daemon: DaemonProcess, client: Client, workspace: Path) -> None:
    sid = client.create_session(str(workspace), name="asks-deny").id
    with _call_in_background(client, sid, "touch denied.txt") as box:
        code = _ask_code(client, sid)
        r = ctl.run("--socket", daemon.socket, "deny", code, "-s", "asks-deny", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["decision"] == "deny"
    assert box["result"].is_error and not (workspace / "denied.txt").exists()
    sid2 = client.create_session(str(workspace), name="asks-always").id
    with _call_in_background(client, sid2, "touch kept.txt") as box:
        code = _ask_code(client, sid2)
        r = ctl.run("--socket", daemon.socket, "always", code, "--json")
        assert r.returncode == 0, r.stderr
        rule = json.loads(r.stdout)["rule"]
        assert rule.startswith("Bash(touch"), rule
    assert not box["result"].is_error
    assert rule in client.get_session(sid2).allow_rules
