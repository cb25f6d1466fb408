"""Starting a sandboxed run under a shim: the daemon's handle on the shims' forkserver
(agentd/runs/shim/forkserver.py), and spawn, which prepares the sandbox chain and hands
it, with the run's descriptors, to the next spare shim."""

from __future__ import annotations

import array
import contextlib
import json
import os
import socket
import subprocess
import sys
from typing import Any

from agentd.changes.reader import Watch
from agentd.runs.shim import protocol
from agentd.runs.shim.client import TAIL, ShimOutput, ShimRun
from agentd_sandbox import SandboxPolicy, SandboxUnavailable
from agentd_sandbox.runner import _give_pipe, prepare


class Forkserver:
    """The warm process shims are forked from (fork of a small single-threaded Python is
    a fraction of a millisecond; an exec of a new interpreter tens of milliseconds)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "agentd.runs.shim", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")},
            )
        self._sock = ours

    def send(self, req: dict[str, Any], fds: list[int]) -> None:
        self.start()
        assert self._sock is not None
        data = json.dumps(req).encode()
        try:
            self._sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            )
        except OSError:  # it died: once more with a new one
            self._proc = None
            self.start()
            self._sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            )

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2)


async def spawn(
    forkserver: Forkserver,
    policy: SandboxPolicy,
    argv: list[str],
    output_path: str,
    output_fd: int,
    limit: int,
    pass_fds: tuple[int, ...] = (),
    hold_fds: tuple[int, ...] = (),
    watch: Watch | None = None,
    pty: tuple[int, int] | None = None,
    stdin: bool = False,
) -> ShimRun | None:
    """Start `argv` in the sandbox under a shim (forked from `forkserver`, the daemon's)
    writing `output_path` (opened as
    `output_fd`, which the caller closes after). None when this machine's chain needs a
    step in the child only subprocess can do (no setpriv or prlimit: the caller runs it
    in-process then, and it does not outlive the daemon). `hold_fds` the shim keeps open
    until the end without using them: read ends of pipes the command writes to (its cwd
    report), so that a write after the daemon is gone is not a SIGPIPE. `watch`:
    the run's fanotify group, change log and the log's cap (agentd/changes/), for its
    reader. `pty`:
    (rows, cols) of a pseudo-terminal the shim makes the command's (argv must then start
    with terminal.CTTY_ARGV, inside the sandbox); `stdin`: a pipe for its input."""
    launch = prepare(policy, argv, pass_fds)
    if "preexec_fn" in launch.popen_kwargs or "user" in launch.popen_kwargs:
        launch.close()
        if launch.lifeline is not None:
            launch.lifeline.close()
        return None
    passed = [fd for fd in launch.popen_kwargs["pass_fds"]]
    if len(passed) + len(hold_fds) + 5 > protocol.MAX_FDS:
        # More descriptors than one message carries (a workspace with very many nested
        # git dirs, each bound by descriptor): the caller runs it in its own process.
        launch.close()
        if launch.lifeline is not None:
            launch.lifeline.close()
        return None
    pipe_r, pipe_w = os.pipe2(os.O_CLOEXEC)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        _give_pipe(pipe_w, launch.ident)
        assert launch.lifeline is not None
        req = {
            "argv": launch.argv,
            "targets": passed,
            "path": output_path,
            "limit": limit,
            "tail": TAIL,
            "wall": policy.limits.wall_seconds,
            "hold": len(hold_fds),
            "watch": 2 if watch else 0,
            "watch_cap": watch.cap if watch else 0,
            "pty": list(pty) if pty else None,
            "stdin": stdin,
        }
        fds = [theirs.fileno(), output_fd, pipe_r, pipe_w, launch.lifeline.fileno()]
        fds += [*hold_fds, *((watch.group, watch.log) if watch else ()), *passed]
        forkserver.send(req, fds)
    except OSError as exc:
        ours.close()
        raise SandboxUnavailable(f"cannot start the run's supervisor: {exc}") from exc
    finally:
        launch.close()
        theirs.close()
        for fd in (pipe_r, pipe_w):
            os.close(fd)
        if launch.lifeline is not None:
            launch.lifeline.close()
    run = ShimRun(ours, ShimOutput(output_path, os.dup(output_fd)))
    run.set_terminal(pty, stdin)
    return run
