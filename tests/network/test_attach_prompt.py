"""A network ask on a real `agentctl attach` terminal: the same prompt as a Bash ask,
naming the host and the call, answered from the keyboard."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentd_client import Client
from tests.e2e.test_agentctl_attach import _read_until
from tests.network.support import ASKED, Origin
from tests.support.daemon import DaemonProcess

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("answer", "reached"), [("y", True), ("n", False)])
def test_a_network_ask_is_answered_on_an_attached_terminal(
    proxied_daemon: DaemonProcess, net_workspace: Path, origin: Origin, answer: str, reached: bool
) -> None:
    with Client(proxied_daemon.socket, timeout=90) as client:
        sid = client.create_session(str(net_workspace)).id
        client.update_permissions(sid, allow=["Bash(curl:*)"])  # only the host is asked
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd_client.cli.main", "--socket", proxied_daemon.socket]
            + ["attach", sid],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        try:
            out: dict[str, object] = {}
            client.run_tool(sid, "Glob", {"pattern": "*"})
            _read_until(master, b"Glob")  # attached
            url = f"http://{ASKED}:{origin.port}/"
            caller = threading.Thread(
                target=lambda: out.update(
                    r=client.run_tool(sid, "Bash", {"command": f"curl -sS {url}"})
                )
            )
            caller.start()
            seen = _read_until(master, b"[y/N/a")
            assert b"Network" in seen and f"{ASKED}:{origin.port}".encode() in seen, seen
            os.write(master, answer.encode() + b"\n")
            caller.join(60)
            text = out["r"].text  # type: ignore[attr-defined]
            assert ("ORIGIN-REACHED" in text) is reached, text
            if not reached:
                assert "refused by" in text, text
        finally:
            proc.terminate()
            proc.wait(10)
            os.close(master)
