"""The run's reader: pid 1 of a pid namespace that holds the whole sandboxed run, reading
the run's fanotify group and keeping, in the run's change log, exactly the events its
own processes caused.

The shim starts it (`start`) before it spawns the sandbox chain, which then lands in the
reader's namespace (unshare(CLONE_NEWPID) changes where the shim's *next* children go;
the reader is the first). Read from here, an event's pid is 0 for any process outside
the namespace (the person's editor, other sessions, the daemon itself) and non-zero for
the run's, however short-lived (fanotify.py says why). The reader dies with the shim
(parent-death signal), and with it the namespace, so it never outlives its run; the
shim ends it only after the chain has exited, by `finish`: it drains what is queued
(every event the run caused was queued before its processes exited), writes an end
mark and exits.

Writes are the only repeated events folded (a file written many times between two
reads is one record); the log is capped, past which a lost mark says only a scan can
tell what changed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from dataclasses import dataclass
from typing import NamedTuple

from agentd.changes import fanotify
from agentd_sandbox import linux

# The most a run's log may hold unless the daemon says (config changes_log_bytes);
# beyond, events are dropped and marked lost.
LOG_CAP = 64 * 1024 * 1024


class Watch(NamedTuple):
    """What a run's shim needs to start its reader: the fanotify group, the change log,
    and the most the log may hold (bytes)."""

    group: int
    log: int
    cap: int


# Folded writes are forgotten this often, so a later write shows again.
FOLD_SECONDS = 0.5
# The least time between two reads of the group (the stop is answered at once).
BATCH_SECONDS = 0.02


@dataclass
class Reader:
    """The shim's handle on its run's reader."""

    pid: int
    stop: int  # write end of the pipe that tells it to finish

    def finish(self) -> None:
        """Drain, mark the end, exit; wait for it (the log is complete after this)."""
        with contextlib.suppress(OSError):
            os.write(self.stop, b"x")
        with contextlib.suppress(OSError):
            os.close(self.stop)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def start(group: int, log: int, cap: int = LOG_CAP) -> Reader:
    """Make the next children of this process members of a new pid namespace whose pid 1
    is the reader of `group`, writing at most `cap` bytes to `log`. Raises OSError if
    this cannot be done (then nothing changed: the caller spawns as before, untracked)."""
    linux.unshare(linux.CLONE_NEWPID)
    try:
        stop_r, stop_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
    except OSError:
        _children_back_home()
        raise
    if pid == 0:  # the reader
        code = 0
        try:
            # A shim that died before this was armed has closed the stop pipe: the
            # loop reads its end and finishes (getppid() is 0 here: the shim is
            # outside the namespace).
            linux.set_parent_death_signal(signal.SIGKILL)
            _keep_only((group, log, stop_r))
            run(group, log, stop_r, cap)
        except BaseException:  # noqa: BLE001 - the reader's last act is to exit
            code = 1
        finally:
            os._exit(code)
    os.close(stop_r)
    return Reader(pid, stop_w)


def _children_back_home() -> None:
    """Undo the unshare: a namespace whose pid 1 never came cannot take children."""
    fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:  # on failure, the error that brought us here is the one reported
        with contextlib.suppress(OSError):
            linux.setns(fd, linux.CLONE_NEWPID)
    finally:
        os.close(fd)


def _keep_only(fds: tuple[int, ...]) -> None:
    """Close every inherited descriptor but `fds` (and stdio): the reader must not keep
    the shim's sockets and pipes open after the shim. (The open ones, from
    /proc/self/fd: a closerange to the fd limit costs tens of thousands of calls.)"""
    keep = {0, 1, 2, *fds}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def run(group: int, log: int, stop: int, cap: int = LOG_CAP) -> None:
    """The reader's loop (see the module docstring). After a read it waits BATCH_SECONDS
    for the stop before reading again: events arrive in batches, and a process that
    writes a file for each read of ours (strace -o on the same filesystem) cannot keep it
    spinning."""
    state = _State(log, cap)
    poller = select.poll()
    poller.register(group, select.POLLIN)
    poller.register(stop, select.POLLIN)
    only_stop = select.poll()
    only_stop.register(stop, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll(int(FOLD_SECONDS * 1000))}
        state.tick()
        if group in ready and stop not in ready:
            state.take(fanotify.read_available(group))
            ready = {fd for fd, _ in only_stop.poll(int(BATCH_SECONDS * 1000))}
        if stop in ready:
            while chunk := fanotify.read_available(group):
                state.take(chunk)
                if fanotify.drained(chunk):
                    break
            state.write(fanotify.marker(fanotify.MARK_END))
            return


class _State:
    def __init__(self, log: int, cap: int = LOG_CAP) -> None:
        self.log = log
        self.cap = cap
        self.written = 0
        self.lost = False
        self.folded: set[bytes] = set()
        self.folded_at = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.folded_at >= FOLD_SECONDS:
            self.folded.clear()
            self.folded_at = now

    def take(self, buf: bytes) -> None:
        """Keep the run's own events of `buf` (pid 2 and up here)."""
        out = bytearray()
        off, n = 0, len(buf)
        meta = fanotify.METADATA
        while n - off >= meta.size:
            length, _vers, _, _mlen, mask, _fd, pid = meta.unpack_from(buf, off)
            if length < meta.size or off + length > n:
                break
            if mask & fanotify.FAN_Q_OVERFLOW:
                out += fanotify.marker(fanotify.MARK_LOST)
            elif pid > 1:  # 0: not the run's; 1: the reader itself, writing the log
                record = buf[off : off + length]
                if mask & fanotify.DIRENT:
                    self.folded.clear()
                    out += record
                elif mask == fanotify.FAN_MODIFY:
                    key = record[meta.size :]
                    if key not in self.folded:
                        self.folded.add(key)
                        out += record
                else:
                    out += record
            off += length
        if out:
            self.write(bytes(out))

    def write(self, data: bytes) -> None:
        if self.lost and data != fanotify.marker(fanotify.MARK_END):
            return
        if self.written + len(data) > self.cap:
            data = fanotify.marker(fanotify.MARK_LOST)
            self.lost = True
        try:
            while data:
                done = os.write(self.log, data)
                data = data[done:]
                self.written += done
        except OSError:
            # The state disk is full or gone: what is missing must read as lost.
            self.lost = True
            with contextlib.suppress(OSError):
                os.write(self.log, fanotify.marker(fanotify.MARK_LOST))
