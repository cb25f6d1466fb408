"""agentctl's caller going away: SIGTERM, SIGHUP, or nobody left reading its output.

Each becomes `Hangup`, a KeyboardInterrupt, so every command's Ctrl-C path runs for it
too: `agentctl call` cancels its call in the daemon, `agentctl agent` cancels the
running calls and records its stop, then the process exits 128+N as a shell reports
a signal. A closed terminal sends SIGHUP. A dropped SSH connection sends nothing to a
command run without a terminal (`ssh host agentctl call ...`): sshd only closes the
pipes, so a thread watches stdout and stderr and takes a hang-up there (nobody can
read what the call would print) as SIGHUP. The daemon cancels a call whose caller's
connection closes anyway (a SIGKILL leaves no chance to ask); this makes it prompt and
says so.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Hangup(KeyboardInterrupt):
    """The caller went away: the signal that said so."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


def exit_code(exc: KeyboardInterrupt, interrupted: int) -> int:
    """128+N for a Hangup, `interrupted` (130) for Ctrl-C."""
    return exc.exit_code if isinstance(exc, Hangup) else interrupted


def why(exc: KeyboardInterrupt) -> str:
    return f"terminated ({exc})" if isinstance(exc, Hangup) else "interrupted"


def say(line: str) -> None:
    """A line on stderr, if there is still anyone to read it (after a hang-up the
    terminal is gone, and writing to it fails)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _raise(signum: int, frame: FrameType | None) -> None:
    # Once is enough: the cancellation under way must not be interrupted by a second
    # signal (a closing terminal may send SIGHUP and then SIGTERM).
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Hangup(signum)


def _watch(fds: list[int]) -> None:
    poller = select.poll()
    for fd in fds:
        poller.register(fd, 0)  # no events asked: POLLERR and POLLHUP come anyway
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        if any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events):
            os.kill(os.getpid(), signal.SIGHUP)
            return
        if any(mask & select.POLLNVAL for _, mask in events):
            return  # closed by the process itself


def install(watch_output: bool = True) -> None:
    """In the main thread, before a command runs."""
    for sig in SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's choice stays
            signal.signal(sig, _raise)
    if not watch_output:
        return
    watched = []
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            continue
        if os.isatty(fd) or _is_stream(fd):
            watched.append(fd)
    if watched:
        threading.Thread(target=_watch, args=(watched,), name="hangup", daemon=True).start()


def _is_stream(fd: int) -> bool:
    """A pipe or socket (a file or /dev/null never hangs up)."""
    import stat

    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
