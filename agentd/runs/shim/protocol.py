"""What the daemon and a shim say to each other, and the files a task's shim keeps in its
directory (the daemon's private state dir, which no sandbox reaches).

Messages go over a SEQPACKET connection, one message each: JSON objects (ops to the
shim, events from it), and binary messages told from JSON (which starts with "{") by
their first byte. From the shim, a terminal's output as it is read: LIVE, the file
offset it was written at, the bytes printed so far, then the bytes (the daemon relays
them to followers; the file is for replay). To the shim, a person's input: INPUT, the
bytes. A terminal's client the daemon hands over: LINK, a link id, the output offset
it is at, with its connection's descriptor (agentd/runs/shim/links.py).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

MAX_MESSAGE = 1 << 16
# Descriptors one start may hand over: the kernel's own cap for one message (SCM_MAX_FD).
MAX_FDS = 253
SOCKET_NAME = "ctl.sock"
STATUS_NAME = "status.json"
SHIM_NAME = "shim.json"
LIVE = 0
INPUT = 1
LINK = 2
LINK_HEADER = struct.Struct("<BQQ")
LIVE_HEADER = struct.Struct("<BQQ")
LIVE_MAX = MAX_MESSAGE - LIVE_HEADER.size
MAX_JSON = 1 << 20


def start_time(pid: int) -> int:
    """The start time of `pid` in clock ticks since boot (with the pid, names a process
    for good: a reused pid has another start time); -1 if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return -1
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def write_json(dir_fd: int, name: str, body: dict[str, Any]) -> None:
    """Atomically (temp file, fsync, rename) write `name` in the directory `dir_fd`."""
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, json.dumps(body).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def read_json(dir_fd: int, name: str) -> dict[str, Any] | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        body = json.loads(os.read(fd, MAX_JSON))
    except ValueError:
        return None
    finally:
        os.close(fd)
    return body if isinstance(body, dict) else None
