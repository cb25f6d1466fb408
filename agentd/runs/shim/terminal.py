"""The shim's side of a run a person drives: its pseudo-terminal or stdin pipe,
the input written to it, signals to its processes, and the terminal's size.

The shim owns the PTY's master (or the pipe's write end), as it owns the output file:
so the terminal outlives the daemon exactly as the task does. The slave goes to the
sandbox as the command's stdin, stdout and stderr; inside, `setsid --ctty` makes it the
command's controlling terminal (bwrap's --new-session has just taken any other away), so
^C, job control and SIGWINCH work as on any terminal. It is a terminal of the shim's
own, never the daemon's or a person's: what the sandbox does with it (TIOCSTI stays
denied by the seccomp filter) reaches only itself.

Input is held in a bounded buffer and written as the terminal takes it, never blocking
the shim; writes are acknowledged ("wrote", n) so the daemon sends no more than a
window ahead (agentd/runs/shim/client.py), and the memory a flooding client costs is
bounded on both sides. Acknowledgements go once ACK_BYTES are written, not per write:
a keystroke costs the daemon no message of its own, and what is left unacknowledged
(under ACK_BYTES) is a small part of the window.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import termios
from typing import Any

# What the daemon may have sent and not yet seen acknowledged (its window); the shim
# holds at most twice that and drops beyond (a daemon that ignores the window).
INPUT_WINDOW = 1 << 18
MAX_PENDING = 2 * INPUT_WINDOW
# Bytes written to the terminal between two acknowledgements (far below INPUT_WINDOW).
ACK_BYTES = 1 << 14
MAX_SIDE = 1000
# A terminal's output is a person's echo: its shim tells the daemon of it within this many
# seconds (a plain run's coalesces 10 ms), and its followers send it on at once (a plain
# run's gather 50 ms per wake-up: agentd/runs/output/registry.py COALESCE).
UPDATE_INTERVAL = 0.001
OUTPUT_COALESCE = 0.0
SIGNALS = {
    "INT": signal.SIGINT,
    "TERM": signal.SIGTERM,
    "HUP": signal.SIGHUP,
    "KILL": signal.SIGKILL,
}
# Run inside the sandbox, before the command: the PTY on stdin made its controlling
# terminal (setsid execs the command itself when, as under bwrap's --new-session, it
# need not fork; --wait: its status, were it to fork).
CTTY_ARGV = ["/usr/bin/setsid", "--wait", "--ctty"]


def valid_size(rows: Any, cols: Any) -> bool:
    return (
        isinstance(rows, int)
        and isinstance(cols, int)
        and 0 < rows <= MAX_SIDE
        and 0 < cols <= MAX_SIDE
    )


def set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Input:
    """A run's input side: a PTY (master kept here, slave for the sandbox) or a pipe."""

    def __init__(self, pty_size: tuple[int, int] | None, stdin: bool) -> None:
        self.pty = pty_size is not None
        self.size = pty_size
        self.fd = -1  # where input goes (a dup of the master, or the pipe's write end)
        self.out_fd = -1  # where output comes from, for a PTY (its master)
        self.child_fd = -1  # what the sandbox gets as stdin (and, for a PTY, stdout/stderr)
        self.pending = bytearray()
        self.closing = False
        self.open = False
        if pty_size is not None:
            master, slave = os.openpty()
            set_size(slave, *pty_size)
            os.set_blocking(master, False)
            self.out_fd, self.child_fd = master, slave
            self.fd = fcntl.fcntl(master, fcntl.F_DUPFD_CLOEXEC, 3)
            os.set_inheritable(master, False)
            self.open = True
        elif stdin:
            r, w = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(w, False)
            self.fd, self.child_fd = w, r
            self.open = True

    @property
    def wanted(self) -> bool:
        """The command's side has been handed one of ours (else it reads /dev/null)."""
        return self.child_fd >= 0 or self.open

    def spawned(self) -> None:
        """The sandbox has its end: ours is closed, so the end of the command is seen."""
        if self.child_fd >= 0:
            os.close(self.child_fd)
            self.child_fd = -1

    def state(self) -> dict[str, Any]:
        return {"pty": list(self.size) if self.size else None, "stdin_open": self.open}

    def add(self, data: bytes) -> int:
        """Queue `data`; how many bytes were taken (none once closed or over the bound)."""
        if not self.open or self.closing or len(self.pending) + len(data) > MAX_PENDING:
            return 0
        self.pending += data
        return len(data)

    def close(self) -> None:
        """End of input once what is queued is written: the pipe closed; on a PTY the
        end-of-file character (the terminal stays, as a person's does after ^D)."""
        if not self.open:
            return
        if self.pty:
            with contextlib.suppress(OSError):
                self.pending += termios.tcgetattr(self.fd)[6][termios.VEOF]
        else:
            self.closing = True
        self._maybe_close()

    def flush(self) -> int:
        """Write what the terminal takes now; the bytes written (0 when it is full)."""
        written = 0
        while self.pending and self.fd >= 0:
            try:
                n = os.write(self.fd, self.pending[:65536])
            except BlockingIOError:
                break
            except OSError:  # the reader is gone: what is queued cannot arrive
                written += len(self.pending)
                self.pending.clear()
                self.closing = True
                break
            del self.pending[:n]
            written += n
        self._maybe_close()
        return written

    def _maybe_close(self) -> None:
        if self.closing and not self.pending and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.open = False

    def resize(self, rows: Any, cols: Any) -> bool:
        if self.out_fd < 0 or not valid_size(rows, cols):
            return False
        with contextlib.suppress(OSError):
            set_size(self.out_fd, rows, cols)
            self.size = (rows, cols)
            return True
        return False

    def finish(self) -> None:
        """The run ended: nothing more goes in."""
        self.spawned()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.pending.clear()
        self.open = False


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    return found


def _sandboxed(pid: int, own_ns: str) -> bool:
    """In the run's own pid namespace, and not its init (bwrap's reaper, which a signal
    from outside would only end abruptly, and every process with it)."""
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") == own_ns:
            return False
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return line.split()[-1] != "1"
    except OSError:
        return False
    return False


def signal_tree(top: int, signum: int) -> int:
    """`signum` to every process of the run below `top` (its sandbox's, as TaskStop
    reaches them), each once; how many were signalled. Walked twice: a process forked
    while the first walk ran is reached by the second."""
    own_ns = os.readlink("/proc/self/ns/pid")
    done: set[int] = set()
    for _ in range(2):
        todo = _children(top)
        while todo:
            pid = todo.pop()
            todo += _children(pid)
            if pid in done or not _sandboxed(pid, own_ns):
                continue
            done.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
    return len(done)
