"""The daemon's side of the host watch (hostwatch.py): it starts the watching process,
marks each workspace filesystem once, and turns what the process forwards into paths
below the roots, for their baselines to look at (service.py)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import struct
import subprocess
import sys
from dataclasses import replace

from agentd.changes import fanotify
from agentd.changes.fanotify import Event
from agentd.changes.resolve import Resolver

log = logging.getLogger(__name__)


def fsid_of(path: str) -> bytes:
    """The filesystem id fanotify reports for files on `path`'s filesystem (statfs
    f_fsid: its two 32-bit words, as the kernel lays them out)."""
    try:
        return struct.pack("<Q", os.statvfs(path).f_fsid & 0xFFFFFFFFFFFFFFFF)
    except OSError:
        return b""


_F_SETPIPE_SZ = 1031
_PIPE_BYTES = 1 << 20
# Records held for the next call to look at, at most; past it, the roots are walked.
_MAX_EVENTS = 100_000
# Seconds a sync may take before what the watch has not told counts as lost.
SYNC_SECONDS = 10.0


class HostWatch:
    def __init__(self, unwatched: tuple[str, ...] = ()) -> None:
        """`unwatched`: files whose own writes are never reported (the daemon's journal:
        each page it writes would cost an event, on the event loop's thread)."""
        self._unwatched = unwatched
        self._group = -1
        self._read = -1
        self._sync = -1
        self._waiting: list[asyncio.Future[None]] = []  # syncs asked, in order
        self._proc: subprocess.Popen[bytes] | None = None
        self._marked: set[int] = set()
        self._buf = b""
        # Events since the last take, each once (a build rewriting one name is one).
        self._events: dict[Event, None] = {}
        self._lost = False  # everything may have been missed
        self._lost_fsids: set[bytes] = set()  # events of these filesystems were dropped
        self._names: set[str] = set()  # known code-bearing files' names, told to the process
        self._untold: list[bytes] = []  # records of names not yet written to it

    def watch(self, root: str) -> bool:
        """Follow `root`'s filesystem (started on first use); False when it cannot."""
        try:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                dev = os.fstat(fd).st_dev
                if dev not in self._marked:
                    fanotify.mark_filesystem(self._group, fd)
                    self._marked.add(dev)
            finally:
                os.close(fd)
            return True
        except OSError as exc:
            log.warning("cannot watch %s for new code-bearing files: %s", root, exc)
            self._lost = True
            return False

    def learn(self, names: set[str]) -> None:
        """Forward events naming these too (the names of known code-bearing files, such
        as a .vscode/settings.json): a person's edit of one is then seen, and adopted,
        where a change no event names is held."""
        new = {n for n in names - self._names if 0 < len(os.fsencode(n)) < 256}
        self._names |= new
        self._untold += [b"n" + bytes([len(b)]) + b for b in map(os.fsencode, sorted(new))]
        self._tell()

    async def learn_all(self, names: set[str]) -> None:
        """`learn`, and return once the watch has every name (or counts events lost): a
        change made after this returns to a file of one of these names is told."""
        self.learn(names)
        loop = asyncio.get_running_loop()
        while self._untold and self._sync >= 0:  # more than the pipe holds: as it drains
            self._tell()
            if not self._untold:
                break
            room: asyncio.Future[None] = loop.create_future()
            loop.add_writer(self._sync, _settle, room)
            try:
                await asyncio.wait_for(room, SYNC_SECONDS)
            except TimeoutError:
                self._lost = True
                return
            finally:
                loop.remove_writer(self._sync)
        await self.sync()

    def _tell(self) -> None:
        """Write what is still untold, one record a write: each is far below PIPE_BUF,
        so a full pipe takes it whole or not at all (the rest waits for the next look;
        the event loop never blocks on the watch)."""
        if self._sync < 0:
            return
        while self._untold:
            try:
                os.write(self._sync, self._untold[0])
            except BlockingIOError:
                return
            except OSError:
                self._lost = True
                return
            self._untold.pop(0)

    def _start(self) -> None:
        self.stop()
        self._group = fanotify.open_group()
        for path in self._unwatched:
            with contextlib.suppress(OSError):  # not made yet (a WAL): its writes are seen
                fanotify.ignore_file(self._group, path)
        read, write = os.pipe2(os.O_CLOEXEC)
        sync_read, sync_write = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(write, _F_SETPIPE_SZ, _PIPE_BYTES)
        fds = (self._group, write, sync_read)
        try:
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")}
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "agentd.changes.hostwatch", *map(str, fds)],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            os.close(write)
            os.close(sync_read)
        self._read = read
        self._sync = sync_write
        os.set_blocking(read, False)
        asyncio.get_running_loop().add_reader(read, self._readable)
        self._marked.clear()
        self._lost = True  # what happened before it watched is not known
        os.set_blocking(sync_write, False)
        self._untold = [b"n" + bytes([len(b)]) + b for b in map(os.fsencode, sorted(self._names))]
        self._tell()

    def _readable(self) -> None:
        try:
            chunk = os.read(self._read, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the watcher died: start again on next use, walk meanwhile
            asyncio.get_running_loop().remove_reader(self._read)
            os.close(self._read)
            self._read = -1
            self._lost = True
            for waiter in self._waiting:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiting.clear()
            return
        events, used = fanotify.parse(self._buf + chunk)
        self._buf = (self._buf + chunk)[used:]
        for event in events:
            if event.marker == fanotify.MARK_LOST:
                self._lost = True
            elif event.marker == fanotify.MARK_SYNC:
                if self._waiting and not (first := self._waiting.pop(0)).done():
                    first.set_result(None)
            elif not event.marker:
                self.keep(event)

    def keep(self, event: Event) -> None:
        """Hold `event` for the next take; past _MAX_EVENTS, it is dropped and only its
        own filesystem counts as having lost events (one session's churn walks no other
        session's workspace)."""
        event = replace(event, mask=0, pid=0)
        if event in self._events:
            return
        if len(self._events) < _MAX_EVENTS:
            self._events[event] = None
            return
        fid = event.dir or event.new_dir or event.old_dir or event.obj
        if fid is None:
            self._lost = True
        else:
            self._lost_fsids.add(fid.fsid)

    async def sync(self) -> None:
        """Wait until every change made before now is told (or count it lost)."""
        if self._sync < 0 or self._read < 0:
            self._lost = True
            return
        self._tell()  # names first: the sync then covers their events too
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            os.write(self._sync, b"s")
            self._waiting.append(done)
            await asyncio.wait_for(asyncio.shield(done), SYNC_SECONDS)
        except (OSError, TimeoutError):
            self._lost = True

    def take(self, roots: list[str]) -> tuple[set[str], set[str]]:
        """Paths named since the last take (a worker thread's job: it resolves handles),
        and the roots that may have missed some (they must be walked again)."""
        events, self._events = list(self._events), {}
        lost, self._lost = self._lost, False
        lost_fsids, self._lost_fsids = self._lost_fsids, set()
        if lost:
            return set(), set(roots)  # walked again: naming what was kept buys nothing
        missed = {r for r in roots if lost_fsids and fsid_of(r) in lost_fsids}
        resolver = Resolver(roots)
        paths: set[str] = set()
        try:
            for event in events:
                for d, name in (
                    (event.dir, event.name),
                    (event.old_dir, event.old_name),
                    (event.new_dir, event.new_name),
                ):
                    if d is not None and name and (parent := resolver.path(d)) is not None:
                        paths.add(os.path.join(parent, name))
        finally:
            resolver.close()
        return paths, missed

    def stop(self) -> None:
        if self._read >= 0:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_reader(self._read)
            os.close(self._read)
            self._read = -1
        for fd in (self._group, self._sync):
            if fd >= 0:
                os.close(fd)
        self._group = self._sync = -1
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._proc = None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
