"""The shims' forkserver (`python -m agentd.runs.shim FD`, started once by the daemon:
agentd/runs/shim/spawn.py): warm, single-threaded, it keeps one spare shim forked and
waiting for the daemon's next run, so no fork or interpreter start is on a call's path.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from typing import Any

from agentd.runs.shim.protocol import MAX_FDS, MAX_MESSAGE
from agentd.runs.shim.supervisor import Shim


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    fds: list[int] = []
    data, anc, _flags, _addr = sock.recvmsg(
        MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += [int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    if not data:
        return None, fds
    return json.loads(data), fds


def _detach_stdio() -> None:
    """A shim outlives the daemon: it must not hold the daemon's stdout and stderr (a
    log pipe would never see its end), nor its terminal."""
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    os.close(null)


def serve(fd: int) -> None:
    """The forkserver: keeps one spare shim forked, waiting for the daemon's next request
    (so no fork is on a call's path), and forks the next spare when it takes one; until
    the daemon closes the socket."""
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # shims are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        taken, tell = os.pipe()
        if os.fork() == 0:
            os.close(taken)
            _spare(sock, tell)
        os.close(tell)
        word = os.read(taken, 1)
        os.close(taken)
        if word != b"t":  # the daemon is gone (or the spare died): no more shims
            return


def _spare(sock: socket.socket, tell: int) -> None:
    """A forked shim-to-be: ready before the request comes, it takes the next one, tells
    the forkserver to fork the next spare, and supervises its run."""
    code = 1
    fds: list[int] = []
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setsid()
        _detach_stdio()
        req, fds = _recv(sock)
        os.write(tell, b"t" if req is not None else b"e")
        os.close(tell)
        sock.close()
        if req is not None:
            code = Shim(req, fds).run()
    except BaseException as exc:  # noqa: BLE001 - the shim's last word, then out
        with contextlib.suppress(OSError, IndexError):
            os.write(fds[1], f"\n[agentd shim failed: {exc!r}]\n".encode())
    finally:
        os._exit(code)
