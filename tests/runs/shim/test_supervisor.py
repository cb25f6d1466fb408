"""agentd/runs/shim/supervisor.py's parts that stand alone: a process named for good by
its start time, the atomic JSON write, exit codes, and descriptors received with a
message (runs themselves: test_client.py, through the forkserver)."""

from __future__ import annotations

import array
import json
import os
import signal
import socket
from pathlib import Path

from agentd.runs.shim import forkserver, protocol
from agentd.runs.shim import supervisor as shim


def test_start_time_names_a_process_for_good() -> None:
    mine = protocol.start_time(os.getpid())
    assert mine > 0
    assert protocol.start_time(os.getpid()) == mine
    assert protocol.start_time(2**22 + 12345) == -1  # past pid_max: no such process


def test_write_json_replaces_whole(tmp_path: Path) -> None:
    dir_fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        protocol.write_json(dir_fd, "status.json", {"code": 1})
        protocol.write_json(dir_fd, "status.json", {"code": 2})
    finally:
        os.close(dir_fd)
    assert json.loads((tmp_path / "status.json").read_text()) == {"code": 2}
    assert os.stat(tmp_path / "status.json").st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temp file left


def test_exit_codes_as_a_shell_reports_them() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert shim._exit_code(os.waitpid(pid, 0)[1]) == 7
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    assert shim._exit_code(os.waitpid(pid, 0)[1]) == 128 + signal.SIGKILL


def test_recv_takes_the_message_and_its_descriptors() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    try:
        theirs.sendmsg(
            [json.dumps({"argv": ["true"]}).encode()],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r, w]))],
        )
        req, fds = forkserver._recv(ours)
        assert req == {"argv": ["true"]}
        assert len(fds) == 2 and all(not os.get_inheritable(fd) for fd in fds)
        os.write(fds[1], b"x")
        assert os.read(r, 1) == b"x"
        for fd in fds:
            os.close(fd)
        theirs.close()
        assert forkserver._recv(ours) == (None, [])  # the daemon is gone
    finally:
        for fd in (r, w):
            os.close(fd)
        ours.close()


def test_children_lists_a_process_children() -> None:
    pid = os.fork()
    if pid == 0:
        signal.pause()
        os._exit(0)
    try:
        assert pid in shim._children(os.getpid())
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert shim._children(2**22 + 12345) == []
