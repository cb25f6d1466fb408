"""A restart refuses no client of the API: the listening socket is held while no daemon
runs (agentd/api/handover.py), so a connection made after a kill -9 waits in its backlog
and is served by the next daemon; a client that connects in a loop across the restart is
never refused. Past `restart_wait_seconds` with no daemon back, and after a stop, clients
are refused as when no daemon runs."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from agentd_client import Client
from tests.support.daemon import start_daemon
from tests.support.knocker import Knocker, connects
from tests.support.waiting import wait_until


def _status_pid(path: str, into: list[int]) -> None:
    with Client(path, timeout=120) as c:
        into.append(c.status().pid)


def test_a_restart_refuses_no_client_and_serves_those_that_waited(tmp_path: Path) -> None:
    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with Client(first.socket, timeout=60) as c:
            before = c.status().pid
        knocker = Knocker(first.socket)
        wait_until(lambda: knocker.counts["ok"] >= 5, 30, "connections before the kill")
        first.stop(signal.SIGKILL)
        # A call made while no daemon runs: it waits, then the next daemon answers it.
        answered: list[int] = []
        waiting = threading.Thread(target=_status_pid, args=(first.socket, answered))
        waiting.start()
        time.sleep(0.5)
        assert not answered
        ok_while_down = knocker.counts["ok"]
        second = start_daemon(base)
        try:
            waiting.join(120)
            assert answered and answered[0] not in (0, before), answered
            wait_until(lambda: knocker.counts["ok"] >= ok_while_down + 20, 30, "after the restart")
            with Client(second.socket, timeout=60) as c:  # and a new client directly
                assert c.status().pid == answered[0]
        finally:
            counts = knocker.stop()
            assert second.stop() == 0, second.log
    finally:
        first.stop(signal.SIGKILL)
    assert counts["refused"] == 0, f"{counts['refused']} of {sum(counts.values())} refused"
    assert ok_while_down > 0, "no connection was made while no daemon ran"


def test_clients_are_refused_once_the_wait_runs_out_and_after_a_stop(tmp_path: Path) -> None:
    base = tmp_path / "d"
    config = tmp_path / "agentd.toml"
    config.write_text("restart_wait_seconds = 1\n")
    daemon = start_daemon(base, extra_args=["--config", str(config)])
    daemon.stop(signal.SIGKILL)
    assert connects(daemon.socket)  # held: it waits in the backlog
    wait_until(lambda: not connects(daemon.socket), 30, "the held socket let go")

    again = start_daemon(base)
    assert again.stop() == 0, again.log
    assert not connects(again.socket)  # a stop is not a restart: nothing waits for an answer


def test_a_second_daemon_takes_no_live_daemons_socket(tmp_path: Path) -> None:
    """The holder answers one daemon at a time: a second one started while the first
    serves is given nothing, finds the socket live and refuses to start."""
    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with pytest.raises(RuntimeError, match="another agentd is already listening"):
            start_daemon(base, timeout=60)
        with Client(first.socket, timeout=30) as c:
            assert c.status().pid == first.proc.pid
    finally:
        assert first.stop() == 0, first.log
