"""fanotify(7) as agentd uses it: a group per run that reports, by directory handle and
name, every file created, deleted, renamed, written or re-moded on the filesystems that
hold the workspace.

A filesystem mark reports every process's changes. Which ones are the run's is decided
by the pid each event carries, translated into the pid namespace of whoever *reads* the
event: the run's reader (reader.py) is pid 1 of a namespace holding the whole sandbox,
so it reads 0 for every other process and the run's own pid otherwise, even for a
process that has exited since (the event keeps its `struct pid`).

Only stdlib and agentd_sandbox.linux here: the shim imports the reader, and the reader
imports this.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

from agentd_sandbox import linux

# fanotify_init flags
FAN_CLOEXEC = 0x01
FAN_NONBLOCK = 0x02
FAN_CLASS_NOTIF = 0x00
FAN_UNLIMITED_QUEUE = 0x10
FAN_REPORT_FID = 0x200
FAN_REPORT_DIR_FID = 0x400
FAN_REPORT_NAME = 0x800
FAN_REPORT_TARGET_FID = 0x1000
# fanotify_mark flags
FAN_MARK_ADD = 0x01
FAN_MARK_IGNORED_MASK = 0x20
FAN_MARK_IGNORED_SURV_MODIFY = 0x40
FAN_MARK_FILESYSTEM = 0x100
AT_FDCWD = -100
# events
FAN_MODIFY = 0x02
FAN_ATTRIB = 0x04
FAN_CLOSE_WRITE = 0x08
FAN_MOVED_FROM = 0x40
FAN_MOVED_TO = 0x80
FAN_CREATE = 0x100
FAN_DELETE = 0x200
FAN_Q_OVERFLOW = 0x4000
FAN_RENAME = 0x10000000
FAN_ONDIR = 0x40000000
# info record types
INFO_FID = 1
INFO_DFID_NAME = 2
INFO_DFID = 3
INFO_OLD_DFID_NAME = 10
INFO_NEW_DFID_NAME = 12
NAMED = (INFO_DFID_NAME, INFO_OLD_DFID_NAME, INFO_NEW_DFID_NAME)

METADATA = struct.Struct("<IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
INFO_HEADER = struct.Struct("<BBH")
METADATA_VERSION = 3

# What a run's group reports: every change to a name or a file's content or mode.
MASK = FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_ATTRIB | FAN_ONDIR
DIRENT = FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_MOVED_FROM | FAN_MOVED_TO
INIT_FLAGS = (
    FAN_CLASS_NOTIF
    | FAN_CLOEXEC
    | FAN_NONBLOCK
    | FAN_UNLIMITED_QUEUE
    | FAN_REPORT_FID
    | FAN_REPORT_DIR_FID
    | FAN_REPORT_NAME
    | FAN_REPORT_TARGET_FID
)

# Records the reader adds to a log (vers 0, which the kernel never uses).
MARK_END = 1  # the run ended and every event before its end is in the log
MARK_LOST = 2  # events were lost (queue overflow, log cap): only a scan can tell
MARK_SYNC = 3  # the host watch: everything queued before the daemon asked is forwarded


def open_group() -> int:
    """A new group (needs CAP_SYS_ADMIN); raises OSError when the kernel cannot."""
    return linux.fanotify_init(INIT_FLAGS, os.O_RDONLY | os.O_CLOEXEC | os.O_LARGEFILE)


def mark_filesystem(group: int, dir_fd: int) -> None:
    """Report changes on the whole filesystem holding the directory `dir_fd`."""
    flags = FAN_MARK_ADD | FAN_MARK_FILESYSTEM
    linux.fanotify_mark(group, flags, MASK, dir_fd, ".")


def ignore_file(group: int, path: str) -> None:
    """Report nothing of what happens to the file at `path` itself (its writes, mode, closes),
    whatever else is marked: the daemon's journal, written by the megabyte, costs the kernel
    an event per page written, on the writing (event loop) thread."""
    flags = FAN_MARK_ADD | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY
    mask = FAN_MODIFY | FAN_CLOSE_WRITE | FAN_ATTRIB
    linux.fanotify_mark(group, flags, mask, AT_FDCWD, path)


def marker(kind: int) -> bytes:
    """A record of the reader's own (MARK_END, MARK_LOST)."""
    return METADATA.pack(METADATA.size, 0, 0, METADATA.size, kind, -1, 0)


@dataclass(frozen=True, slots=True)
class Fid:
    """A file handle on a filesystem (the fsid says which)."""

    fsid: bytes
    handle: bytes  # handle_type (4 bytes) + f_handle: a dict key, and what open_by_handle_at takes


@dataclass(frozen=True, slots=True)
class Event:
    """One reported change: what happened, by whom (0: not the run), to which names."""

    mask: int
    pid: int
    dir: Fid | None = None  # the directory of `name` (DFID_NAME)
    name: str = ""
    obj: Fid | None = None  # the object itself (its own handle: FID)
    old_dir: Fid | None = None  # FAN_RENAME: where it was
    old_name: str = ""
    new_dir: Fid | None = None  # FAN_RENAME: where it is now
    new_name: str = ""
    marker: int = 0  # MARK_END / MARK_LOST for the reader's own records

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & FAN_ONDIR)


def parse(buf: bytes) -> tuple[list[Event], int]:
    """The events in `buf` and how many bytes they took (a torn tail is left)."""
    events: list[Event] = []
    off = 0
    n = len(buf)
    while n - off >= METADATA.size:
        length, vers, _, meta_len, mask, _fd, pid = METADATA.unpack_from(buf, off)
        if length < METADATA.size or off + length > n:
            break
        if vers == 0:
            events.append(Event(0, 0, marker=mask))
        elif mask & FAN_Q_OVERFLOW:
            events.append(Event(0, 0, marker=MARK_LOST))
        else:
            events.append(_event(buf, off + meta_len, off + length, mask, pid))
        off += length
    return events, off


def _event(buf: bytes, pos: int, end: int, mask: int, pid: int) -> Event:
    fields: dict[str, object] = {}
    while end - pos >= INFO_HEADER.size:
        kind, _, length = INFO_HEADER.unpack_from(buf, pos)
        if length < INFO_HEADER.size or pos + length > end:
            break
        body = buf[pos + INFO_HEADER.size : pos + length]
        fid, name = _fid(body, named=kind in NAMED)
        if kind == INFO_FID:
            fields["obj"] = fid
        elif kind in (INFO_DFID_NAME, INFO_DFID):
            fields["dir"], fields["name"] = fid, name
        elif kind == INFO_OLD_DFID_NAME:
            fields["old_dir"], fields["old_name"] = fid, name
        elif kind == INFO_NEW_DFID_NAME:
            fields["new_dir"], fields["new_name"] = fid, name
        pos += length
    return Event(mask, pid, **fields)  # type: ignore[arg-type]


def _fid(body: bytes, *, named: bool) -> tuple[Fid, str]:
    fsid = body[:8]
    handle_bytes = int.from_bytes(body[8:12], "little")
    handle = body[12 : 16 + handle_bytes]  # handle_type, then the handle
    name = ""
    if named:
        raw = body[16 + handle_bytes :]
        name = os.fsdecode(raw.split(b"\0", 1)[0])
    return Fid(fsid, handle), name


def fsid_of(path_fd: int) -> bytes:
    """The 8-byte fsid fanotify reports for the filesystem holding `path_fd` (glibc's
    statvfs packs statfs's two 32-bit halves into one number)."""
    value = os.fstatvfs(path_fd).f_fsid
    return struct.pack("<II", value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF)


READ_SIZE = 1 << 16
# An event with its file handle and name is far smaller than this: a read that left this
# much of the buffer empty emptied the queue.
_EVENT_ROOM = 4096


def drained(chunk: bytes) -> bool:
    """Whether the read that returned `chunk` emptied the queue: everything queued before
    it has been read. A drain stops there, so events made meanwhile (strace -o writing a
    line for each of our reads) cannot keep it reading forever."""
    return len(chunk) < READ_SIZE - _EVENT_ROOM


def read_available(group: int, size: int = READ_SIZE) -> bytes:
    """What the group holds now (b"" when nothing: the fd is non-blocking)."""
    try:
        return os.read(group, size)
    except BlockingIOError:
        return b""
    except OSError as exc:
        if exc.errno == errno.EINTR:
            return b""
        raise
