"""Running the real agentctl command: as a subprocess, or on a pseudo-terminal of its own."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """agentctl with `args`, its environment cleared of AGENTD_* unless `env` sets them."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    return subprocess.run(
        [AGENTCTL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """agentctl running on, its stdout a pipe of text lines."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    return subprocess.Popen(
        [AGENTCTL, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**clean, **(env or {})},
    )


def one_line(text: str) -> str:
    """The text, asserted to be a single line: errors for people are one line."""
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{text}"
    assert "Traceback" not in text, text
    return lines[0]


@dataclass
class OnPty:
    """agentctl on a pty that is its controlling terminal: ^C there is a real SIGINT."""

    proc: subprocess.Popen[bytes]
    master: int
    seen: bytes = b""

    def read_until(self, needle: bytes, timeout: float = 30) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{needle!r} not seen; got {self.seen[-2000:]!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # EIO: the other side closed
                    chunk = b""
                if not chunk:
                    raise EOFError(self.seen)
                self.seen += chunk
        return self.seen

    def drain(self) -> bytes:
        """What is left to read once the process has exited."""
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                return self.seen
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return self.seen
            if not chunk:
                return self.seen
            self.seen += chunk

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


def on_pty(*args: str, env: dict[str, str] | None = None) -> OnPty:
    """agentctl in a session of its own whose controlling terminal is the pty.

    setsid(1) makes both (in place: the child is no group leader, so it does not fork
    and the pid is agentctl's). Not a preexec_fn: Python code in a child forked from
    this process, whose gRPC threads are running, can crash it before it execs
    (gRPC's fork handlers restart a poller whose epoll fd close_fds then closes)."""
    master, slave = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    proc = subprocess.Popen(
        ["setsid", "--ctty", AGENTCTL, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        env={**clean, **(env or {})},
    )
    os.close(slave)
    return OnPty(proc, master)
