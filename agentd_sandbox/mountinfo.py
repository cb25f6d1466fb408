"""/proc/self/mountinfo, read again only once the kernel says the mount table changed (the
cgroup mounts every sandbox start covers come from it: cgroups/hierarchy.py)."""

from __future__ import annotations

import os
import select
import threading


class MountTable:
    """/proc/self/mountinfo, read again only once the kernel says the mount table changed:
    a poll on an open mountinfo reports POLLPRI once the table of the namespace it was
    opened in has changed since the last poll. One open file per mount namespace (a
    process may move to another) and per process (a fork shares the open file)."""

    def __init__(self, path: str = "/proc/self/mountinfo") -> None:
        self._path = path
        self._lock = threading.Lock()
        self._open: dict[tuple[int, int], tuple[int, str]] = {}  # (pid, ns) -> (fd, text)
        self.reads = 0

    def text(self) -> str:
        try:
            namespace = os.stat("/proc/self/ns/mnt").st_ino
        except OSError:
            namespace = 0
        key = (os.getpid(), namespace)
        with self._lock:
            held = self._open.get(key)
            if held is not None:
                fd, text = held
                if not _changed(fd):
                    return text
            else:
                fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            text = _read_all(fd)
            self.reads += 1
            self._open[key] = (fd, text)
            return text


def _changed(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLPRI)
    return any(events & (select.POLLPRI | select.POLLERR) for _, events in poller.poll(0))


def _read_all(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="surrogateescape")


MOUNTS = MountTable()
