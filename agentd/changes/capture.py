"""Pre-images of files no other source has: a file that existed before the agent wrote
it, that git does not track (or that differs from git's index), first overwritten by a
command.

Taken once per workspace root and sandbox identity, when the first writing command
begins, before it runs (a session that only reads copies nothing): a walk of the root
as the session's identity, by directory descriptor, never following a link, skipping
regenerable trees and git directories, then each file's content copied into a pack of
its own under the daemon's state (pack.py; not the checkpoints' store: what is never
changed never counts there), within a budget of files and bytes. Files git tracks and
that match its index are not copied: the index holds them.

A captured content stays the path's pre-image until something else changes the file:
the host watch is told the captured names, and a change it reports that no running
command of the agent explains drops the path (`forget`), so a person's later edit is
never put back over by the copy taken before it.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field

from agentd.changes import gitblobs, images
from agentd.changes.images import Image
from agentd.changes.pack import Pack, Record
from agentd.fs.identity import FsIdentity, acting_as
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

# Trees a build or an installer makes again: never walked, never copied.
REGENERABLE = frozenset(
    {
        ".git",
        "node_modules",
        ".venv",
        "venv",
        "target",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".gradle",
        ".next",
        ".cache",
    }
)
# The largest file a capture copies (its budget of files and bytes is configured:
# checkpoint_capture_files, checkpoint_capture_bytes).
MAX_FILE_BYTES = 16 * 1024 * 1024
# Files left out that a capture names (past them, one reason stands for the rest).
SKIPPED_NAMED = 20_000
# Entries a walk looks at, at most (a tree past it is captured in part).
MAX_ENTRIES = 200_000
# Bytes read as the session's identity before they are written to the pack as the daemon.
_BATCH_BYTES = 8 * 1024 * 1024
_BENEATH = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


@dataclass
class Capture:
    """What one root held for one identity when its first writing command began."""

    root: str
    pack: Pack | None  # None: the capture failed (nothing copied, the index trusted)
    # rel -> (where its copy is, permission bits).
    files: dict[str, tuple[Record, int]] = field(default_factory=dict)
    # Paths git tracks whose working file matched its index then (the index is their
    # pre-image), None when the root is not a repository git could read.
    clean: set[str] | None = None
    # Files left out, each with why (the budget, its size), up to SKIPPED_NAMED of them.
    skipped: dict[str, str] = field(default_factory=dict)
    # Why further files may have been left out unnamed (empty: none was).
    over: str = ""
    stored: int = 0

    def pre_image(self, rel: str) -> tuple[Image, bytes] | None:
        """The captured image of `rel` and its content, if there is one still."""
        got = self.files.get(rel)
        if got is None:
            return None
        record, mode = got
        data = self.pack.get(record) if self.pack is not None else None
        if data is None:
            return None
        image: Image = {"kind": images.FILE, "mode": mode, "size": len(data), "from": "capture"}
        return image, data

    def why_not(self, rel: str) -> str:
        """Why `rel` has no captured content (a file that existed before the capture)."""
        parts = rel.split("/")
        if any(p in REGENERABLE for p in parts[:-1]):
            return (
                "not restorable: regenerable (not captured below "
                + next(p for p in parts[:-1] if p in REGENERABLE)
                + "/)"
            )
        if why := self.skipped.get(rel) or self.over:
            return f"not restorable: not captured ({why})"
        return images.NOT_CAPTURED

    def skip(self, rel: str, why: str) -> None:
        if len(self.skipped) < SKIPPED_NAMED:
            self.skipped[rel] = why
        else:
            self.over = self.over or why

    def git_trusted(self, rel: str) -> bool:
        """Whether git's index may give `rel`'s pre-image: it matched the index at the
        capture (a file edited outside the agent before then did not)."""
        return self.clean is None or rel in self.clean

    def forget(self, rels: set[str]) -> None:
        """These changed outside the agent's commands: their copies are no longer what
        they held, and the index no longer speaks for them."""
        for rel in rels:
            self.files.pop(rel, None)
            if self.clean is not None:
                self.clean.discard(rel)


@dataclass(frozen=True, slots=True)
class Budget:
    files: int
    bytes: int


def take(
    root: str,
    identity: FsIdentity | None,
    pack: Pack,
    walked: tuple[list[tuple[str, int]], str],
    budget: Budget,
) -> Capture:
    """Copy what no other source holds of the files `walk` found, within the budget,
    read as `identity` a batch at a time and written to `pack` as the daemon (a worker
    thread's job)."""
    capture = Capture(root, pack)
    found, over = walked
    tracked = gitblobs.tracked_clean(root, identity)
    capture.clean = tracked
    capture.over = over
    big = f"files over {_mib(MAX_FILE_BYTES)} are not copied"
    past = f"past the capture's budget of {budget.files} files, {_mib(budget.bytes)}"
    wanted: list[str] = []
    total = 0
    for rel, size in found:
        if tracked is not None and rel in tracked:
            continue
        why = ""
        if size > MAX_FILE_BYTES:
            why = big
        elif len(wanted) >= budget.files or total + size > budget.bytes:
            why = past
        if why:
            capture.skip(rel, why)
            continue
        wanted.append(rel)
        total += size
    try:
        top = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return capture
    try:
        start = 0
        while start < len(wanted):
            batch: list[tuple[str, int, bytes]] = []
            size = 0
            with acting_as(identity):
                while start < len(wanted) and size < _BATCH_BYTES:
                    rel = wanted[start]
                    start += 1
                    if (got := _read(top, rel)) is not None:
                        batch.append((rel, *got))
                        size += len(got[1])
            for rel, mode, data in batch:
                if capture.stored + len(data) > budget.bytes:  # grew since the walk
                    capture.skip(rel, past)
                    continue
                capture.files[rel] = (pack.add(data), mode)
                capture.stored += len(data)
    finally:
        os.close(top)
    return capture


def _read(top: int, rel: str) -> tuple[int, bytes] | None:
    """A regular file's permission bits and content, opened beneath the root with no
    link followed; a FIFO or device never opened for reading; None past the cap."""
    try:
        fd = linux.openat2(top, rel, os.O_PATH | os.O_NOFOLLOW, resolve=_BENEATH)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        rfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    try:
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1
        while left > 0 and (chunk := os.read(rfd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(rfd)
    data = b"".join(chunks)
    return (stat.S_IMODE(st.st_mode), data) if len(data) <= MAX_FILE_BYTES else None


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"


def walk(root: str) -> tuple[list[tuple[str, int]], str]:
    """The regular files below `root` (relative, with their size), and why the walk
    stopped early ("" when it did not). Each directory is opened beneath the root with
    no link followed, one at a time (a wide tree holds no descriptors open)."""
    out: list[tuple[str, int]] = []
    try:
        top = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return out, ""
    pending = ["."]
    seen = 0
    try:
        while pending:
            rel_dir = pending.pop()
            prefix = "" if rel_dir == "." else rel_dir + "/"
            try:
                fd = linux.openat2(top, rel_dir, os.O_RDONLY | os.O_DIRECTORY, resolve=_BENEATH)
            except OSError:
                continue
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > MAX_ENTRIES:
                            return out, f"the workspace has more than {MAX_ENTRIES} entries"
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                if entry.name not in REGENERABLE:
                                    pending.append(prefix + entry.name)
                            elif entry.is_file(follow_symlinks=False):
                                st = entry.stat(follow_symlinks=False)
                                if stat.S_ISREG(st.st_mode):
                                    out.append((prefix + entry.name, st.st_size))
                        except OSError:
                            continue
            except OSError:
                continue
            finally:
                os.close(fd)
    finally:
        os.close(top)
    return out, ""


def clear(base: str) -> None:
    """Copies a previous daemon took: nothing names them any more."""
    shutil.rmtree(base, ignore_errors=True)
