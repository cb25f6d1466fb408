"""Crashes and restarts: whole files, kept sessions, no process left behind.

Each test runs a daemon of its own (tests.support.daemon.start_daemon), since it kills it.
The socket's mode (0600 in a 0700 dir) is covered by test_daemon_basics.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.processes import processes_with, wait_gone, wait_present
from tests.support.waiting import wait_until

SANDBOX_UID = 65534


@pytest.fixture
def ws() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentd-dur-", dir="/tmp"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(root, SANDBOX_UID, SANDBOX_UID)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    d = start_daemon(tmp_path / "d")
    yield d
    d.stop(signal.SIGKILL)


def test_write_killed_midway_leaves_whole_file(own_daemon: DaemonProcess, ws: Path) -> None:
    """SIGKILL the daemon while it Writes a 4 MB file over and over, alternating two
    contents: the file is one of them, whole. A temp file of the interrupted write
    (`.NAME.agentd-*.tmp`, the same directory) may remain; nothing else does."""
    contents = ["a" * (4 << 20), "b" * (4 << 20)]
    target = ws / "big.txt"
    client = Client(own_daemon.socket, timeout=60)
    sid = client.create_session(str(ws), permission_mode="bypassPermissions").id
    first = client.run_tool(sid, "Write", {"file_path": str(target), "content": contents[0]})
    assert not first.is_error, first.text
    writes = 0
    stop = threading.Event()

    def writer() -> None:
        nonlocal writes
        i = 1
        while not stop.is_set():
            try:
                r = client.run_tool(
                    sid, "Write", {"file_path": str(target), "content": contents[i % 2]}
                )
            except grpc.RpcError:
                return  # the daemon is gone
            assert not r.is_error, r.text
            writes += 1
            i += 1

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    wait_until(lambda: writes >= 2, 30, "two writes done")
    # Not a wait: the kill lands at a random point of a write, which is what is tested.
    time.sleep(random.uniform(0.0, 0.3))
    own_daemon.stop(signal.SIGKILL)
    stop.set()
    thread.join(30)
    client.close()

    data = target.read_bytes()
    assert len(data) == len(contents[0])
    assert data in (contents[0].encode(), contents[1].encode())
    for name in os.listdir(ws):
        assert name == "big.txt" or re.fullmatch(r"\.big\.txt\.agentd-.*\.tmp", name), name


def test_sessions_and_journal_survive_restart(tmp_path: Path, ws: Path) -> None:
    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with Client(first.socket, timeout=60) as c:
            s = c.create_session(str(ws), name="kept", permission_mode="bypassPermissions")
            c.run_tool(s.id, "Write", {"file_path": "f.txt", "content": "x\n"}, "toolu_keep_1")
            c.run_tool(s.id, "Bash", {"command": "cat f.txt"}, "toolu_keep_2")
            c.run_tool(
                s.id,
                "TodoWrite",
                {"todos": [{"content": "c", "status": "pending", "activeForm": "C"}]},
                "toolu_keep_3",
            )
            before = list(_replay(c, s.id, "toolu_keep_3"))
    finally:
        assert first.stop(signal.SIGTERM) == 0, first.log

    second = start_daemon(base)
    try:
        with Client(second.socket, timeout=60) as c:
            listed = {x.id: x for x in c.list_sessions()}
            assert s.id in listed and listed[s.id].name == "kept"
            assert listed[s.id].permission_mode == "bypassPermissions"
            after = list(_replay(c, s.id, "toolu_keep_3"))
            assert [e.SerializeToString(deterministic=True) for e in after] == [
                e.SerializeToString(deterministic=True) for e in before
            ]
            finished = {
                e.call_finished.result.tool_use_id: e.call_finished.result
                for e in after
                if e.HasField("call_finished")
            }
            assert set(finished) == {"toolu_keep_1", "toolu_keep_2", "toolu_keep_3"}
            assert finished["toolu_keep_2"].content[0].text.rstrip() == "x"
            # The session goes on: its read-file state too (f.txt was written by it).
            r = c.run_tool(s.id, "Write", {"file_path": "f.txt", "content": "y\n"})
            assert not r.is_error, r.text
            # And new events continue the sequence.
            assert c.run_tool(s.id, "Glob", {"pattern": "*"}, "toolu_keep_4")
            more = list(_replay(c, s.id, "toolu_keep_4", after_seq=after[-1].seq))
            assert more[0].seq == after[-1].seq + 1
    finally:
        assert second.stop(signal.SIGTERM) == 0, second.log


def test_sigkill_keeps_every_call_answered_before_the_commit_window(
    tmp_path: Path, ws: Path
) -> None:
    """The promise (docs/operations.md, "What survives a crash"): journal writes are committed in
    groups at most FLUSH_DELAY after the reply; a daemon killed outright keeps every call
    answered before that window, and its session."""
    from agentd.sessions.store import FLUSH_DELAY

    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with Client(first.socket, timeout=60) as c:
            s = c.create_session(str(ws), permission_mode="bypassPermissions")
            for i in range(3):
                c.run_tool(
                    s.id, "Write", {"file_path": f"f{i}.txt", "content": "x\n"}, f"toolu_k{i}"
                )
            # Not a wait: the promise is a time (answered more than FLUSH_DELAY before
            # the kill), so the test lets that time pass (a busy box: slack).
            time.sleep(FLUSH_DELAY + 0.5)
    finally:
        first.stop(signal.SIGKILL)

    second = start_daemon(base)
    try:
        with Client(second.socket, timeout=60) as c:
            assert s.id in {x.id for x in c.list_sessions()}
            finished = [
                e.call_finished.result.tool_use_id
                for e in _replay(c, s.id, "toolu_k2")
                if e.HasField("call_finished")
            ]
            assert finished == ["toolu_k0", "toolu_k1", "toolu_k2"]
    finally:
        assert second.stop(signal.SIGTERM) == 0, second.log


def _replay(c: Client, sid: str, until_id: str, after_seq: int = 0) -> Iterator:  # type: ignore[type-arg]
    stream = c.attach(sid, after_seq)
    timer = threading.Timer(30, stream.cancel)
    timer.start()
    try:
        for event in stream:
            yield event
            if (
                event.HasField("call_finished")
                and event.call_finished.result.tool_use_id == until_id
            ):
                return
    finally:
        timer.cancel()
        stream.cancel()


def _start_sleepers(d: DaemonProcess, ws: Path) -> tuple[list[str], threading.Thread]:
    """A background task and a foreground call, each a `sleep` of a number of its own."""
    bg, fg = (str(random.randrange(10**6, 10**7)) + ".5" for _ in range(2))
    client = Client(d.socket, timeout=60)
    sid = client.create_session(str(ws), permission_mode="bypassPermissions").id
    r = client.run_tool(sid, "Bash", {"command": f"sleep {bg}", "run_in_background": True})
    assert not r.is_error, r.text

    def foreground() -> None:
        with contextlib.suppress(grpc.RpcError):  # the daemon goes away under it
            client.run_tool(sid, "Bash", {"command": f"sleep {fg}; echo never", "timeout": 600000})

    thread = threading.Thread(target=foreground, daemon=True)
    thread.start()
    markers = [f"sleep {bg}", f"sleep {fg}"]
    # Wait for the sleeps themselves, not just the launchers whose argv names them: a
    # kill while bwrap is still setting up its sandbox is a different (narrower) race.
    for sleep in markers:
        wait_present(sleep.replace(" ", "\0"), 20)
    return markers, thread


def _reap(markers: list[str]) -> None:
    """Kill, by pid, what a failed test's own sandboxes left behind."""
    for marker in markers:
        for pid in processes_with(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_sigkill_ends_the_foreground_call_and_keeps_the_task(
    own_daemon: DaemonProcess, ws: Path
) -> None:
    """A foreground call dies with its daemon; a background task runs on under its shim
    (the next daemon takes it over: tests/e2e/test_tasks_outlive.py) until stopped."""
    markers, thread = _start_sleepers(own_daemon, ws)
    bg, fg = markers
    try:
        own_daemon.stop(signal.SIGKILL)
        wait_gone(fg)
        assert processes_with(bg)
        stopped = subprocess.run(
            [sys.executable, "-m", "agentd", "stop", "--tasks", "--socket", own_daemon.socket]
            + ["--state-dir", own_daemon.state_dir],
            capture_output=True,
            timeout=60,
        )
        assert stopped.returncode == 0, stopped.stderr
        for sleep in markers:
            wait_gone(sleep)
    finally:
        _reap(markers)
    thread.join(10)


def test_sigterm_exits_cleanly_and_leaves_no_process(tmp_path: Path, ws: Path) -> None:
    d = start_daemon(tmp_path / "d")
    try:
        markers, thread = _start_sleepers(d, ws)
    except BaseException:
        d.stop(signal.SIGKILL)
        raise
    code = d.stop(signal.SIGTERM)
    try:
        assert code == 0, d.log
        assert "Traceback" not in d.log, d.log
        for sleep in markers:
            wait_gone(sleep)
    finally:
        _reap(markers)
    thread.join(10)
