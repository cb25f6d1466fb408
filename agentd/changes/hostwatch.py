"""The host watch: listed names that appear, change or go on the workspaces'
filesystems, whoever did it, so that each root's baseline learns of code-bearing files
its walk did not find (a person's `git clone vendor/lib`, a new `app/.claude/`) before
the next command can change them.

A process of its own (`python -m agentd.changes.hostwatch GROUP OUT SYNC`), started by
the daemon, reads a fanotify group the daemon made and marks (it adds a filesystem mark
per new workspace filesystem), and forwards to the daemon over a pipe only the events
whose name is one of the list's (a set lookup on the raw name): a machine's other file
activity costs this process, never the daemon's event loop. It dies with the daemon
(parent-death signal, and the pipe's end). Each byte the daemon writes to SYNC asks for
a sync mark once everything queued so far is forwarded: an event is queued by the
system call that caused it, so after the mark the daemon knows of every change made
before it asked. When the daemon does not keep up, the pipe
is full: the event is dropped and a lost mark sent as soon as there is room, after
which the daemon walks its roots again.

Who made a change does not matter here: the daemon leaves out of a baseline what a
running command has touched (service.py), and what a finished one made was reverted
or approved already.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import sys

from agentd.changes import fanotify
from agentd.sandboxing.codebearing import Table, table
from agentd_sandbox import linux

# Entries of a git directory, and what makes a directory one.
_GIT_TRIGGERS = ("config", "config.worktree", "hooks", "commondir", "gitdir", "alternates",
                 "attributes", "HEAD", ".git")  # fmt: skip
BATCH_MS = 20


def trigger_names(t: Table) -> frozenset[bytes]:
    """Names whose appearance can make a file code-bearing (the list's literal names)."""
    names: set[str] = set(_GIT_TRIGGERS)
    for rule in t.names:
        names.add(rule.parts[0] if rule.whole else rule.parts[-1])
        names.update(rule.parts)
    return frozenset(os.fsencode(n) for n in names)


def _names(buf: bytes, pos: int, end: int) -> list[bytes]:
    found: list[bytes] = []
    while end - pos >= fanotify.INFO_HEADER.size:
        kind, _, length = fanotify.INFO_HEADER.unpack_from(buf, pos)
        if length < fanotify.INFO_HEADER.size or pos + length > end:
            break
        if kind in fanotify.NAMED:
            body = pos + fanotify.INFO_HEADER.size
            handle_bytes = int.from_bytes(buf[body + 8 : body + 12], "little")
            start = body + 16 + handle_bytes
            stop = buf.find(b"\0", start, pos + length)
            found.append(buf[start : stop if stop >= 0 else pos + length])
        pos += length
    return found


def keep(buf: bytes, triggers: frozenset[bytes] | set[bytes]) -> list[bytes]:
    """The records of `buf` that name a trigger (and overflow marks)."""
    out: list[bytes] = []
    meta = fanotify.METADATA
    off, n = 0, len(buf)
    while n - off >= meta.size:
        length, _vers, _, meta_len, mask, _fd, _pid = meta.unpack_from(buf, off)
        if length < meta.size or off + length > n:
            break
        if mask & fanotify.FAN_Q_OVERFLOW:
            out.append(fanotify.marker(fanotify.MARK_LOST))
        elif any(name in triggers for name in _names(buf, off + meta_len, off + length)):
            out.append(buf[off : off + length])
        off += length
    return out


def told(data: bytes, triggers: set[bytes]) -> tuple[bytes, bytes]:
    """What the daemon wrote on SYNC: `s` asks for a sync mark, `n` + a length byte +
    a name adds a trigger. The syncs asked (one byte each), and an incomplete tail."""
    asked = bytearray()
    i = 0
    while i < len(data):
        if data[i : i + 1] == b"n":
            if i + 2 > len(data) or i + 2 + data[i + 1] > len(data):
                break
            triggers.add(bytes(data[i + 2 : i + 2 + data[i + 1]]))
            i += 2 + data[i + 1]
        else:
            asked.append(data[i])
            i += 1
    return bytes(asked), data[i:]


def run(group: int, out: int, sync: int) -> None:
    """Forward kept records one write each: a record is far below PIPE_BUF, so it is
    written whole or not at all, and the daemon never reads half of one."""
    triggers = set(trigger_names(table()))
    os.set_blocking(out, False)
    poller = select.poll()
    poller.register(group, select.POLLIN)
    poller.register(sync, select.POLLIN)
    poller.register(out, select.POLLERR)  # the daemon closed its end
    # After a read, only a sync (or the daemon's end) is answered for BATCH_SECONDS: a
    # process writing a file for each read of ours (strace -o) cannot keep it spinning.
    between = select.poll()
    between.register(sync, select.POLLIN)
    between.register(out, select.POLLERR)
    owed_lost = False
    read_last = False
    pending = b""
    while True:
        ready = dict((between if read_last else poller).poll(BATCH_MS if read_last else None))
        read_last = False
        if out in ready:
            return
        if not ready:
            continue  # the pause after a read is over
        got = os.read(sync, 65536) if sync in ready else b""
        if sync in ready and not got:
            return  # the daemon is gone
        asked, pending = told(pending + got, triggers)
        records: list[bytes] = []
        while chunk := fanotify.read_available(group):
            records += keep(chunk, triggers)
            read_last = True
            if not asked or fanotify.drained(chunk):
                break  # a sync drains what was queued; otherwise one read per wake
        if owed_lost:
            records.insert(0, fanotify.marker(fanotify.MARK_LOST))
        owed_lost = False
        records += [fanotify.marker(fanotify.MARK_SYNC)] * len(asked)
        for record in records:
            try:
                os.write(out, record)
            except BlockingIOError:
                owed_lost = True  # the daemon is behind: it walks again
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    return
                raise


def main() -> None:
    linux.set_parent_death_signal(signal.SIGKILL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    group, out, sync = (int(a) for a in sys.argv[1:4])
    if os.getppid() == 1:
        return  # the daemon is already gone
    run(group, out, sync)


if __name__ == "__main__":
    main()
