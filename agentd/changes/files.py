"""A code-bearing file as agentd keeps it (an Entry), and the file work of holding one:
read, remove, put back, rename, all beneath the workspace root, as the session's
sandbox identity, never through a symlink (every directory on the way is opened with
openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, the entry itself by name in it without
following it), never blocking on a FIFO.

Callers run these in a worker thread acting as the identity (agentd.fs.identity).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from agentd_sandbox import anchored

# A code-bearing file larger than this is kept as a digest only: it can be removed, not
# put back (none of the listed files is anywhere near it).
CONTENT_CAP = 1024 * 1024


FILE, SYMLINK, DIR, OTHER = "file", "symlink", "dir", "other"


@dataclass(frozen=True, slots=True)
class Entry:
    """A file's kind, mode and content (None: over CONTENT_CAP, or not a file)."""

    kind: str  # FILE, SYMLINK, DIR or OTHER
    mode: int = 0
    content: bytes | None = None  # a symlink's target for SYMLINK
    digest: str = ""
    size: int = 0
    key: tuple[int, ...] = ()  # (dev, ino, mtime_ns, ctime_ns, size, mode): unchanged if equal

    def same(self, other: Entry | None) -> bool:
        """The same kind, permission bits and bytes."""
        return (
            other is not None
            and self.kind == other.kind
            and (self.kind == DIR or self.digest == other.digest)
            and (self.kind == SYMLINK or self.mode & 0o7777 == other.mode & 0o7777)
        )

    @property
    def restorable(self) -> bool:
        return self.kind == DIR or (self.kind in (FILE, SYMLINK) and self.content is not None)


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_mode)


def _openat2(dir_fd: int, rel: str, flags: int) -> int:
    """`rel` beneath `dir_fd`, no link followed anywhere on the way."""
    return anchored.openat2(dir_fd, rel, flags)


@contextmanager
def parent_of(root: str, rel: str, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the directory holding `rel` below `root` (made, when `create`)."""
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = root_fd
    try:
        for part in [p for p in os.path.dirname(rel).split("/") if p and p != "."]:
            try:
                nfd = _openat2(fd, part, os.O_PATH | os.O_DIRECTORY)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nfd = _openat2(fd, part, os.O_PATH | os.O_DIRECTORY)
            if fd != root_fd:
                os.close(fd)
            fd = nfd
        yield fd
    finally:
        if fd != root_fd:
            os.close(fd)
        os.close(root_fd)


def read_entry(root: str, rel: str, *, cap: int = CONTENT_CAP) -> Entry | None:
    """What is at `rel` now; None when nothing is (or a directory on the way is a link)."""
    name = os.path.basename(rel)
    try:
        with parent_of(root, rel) as dir_fd:
            return read_at(dir_fd, name, cap=cap)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            return None
        raise


def read_at(
    dir_fd: int, name: str, *, cap: int = CONTENT_CAP, reuse: Entry | None = None
) -> Entry | None:
    """What `name` in `dir_fd` is now; `reuse` when its stat says it did not change."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    key = stat_key(st)
    if reuse is not None and reuse.key == key:
        return reuse
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(name, dir_fd=dir_fd).encode("utf-8", "surrogateescape")
        except OSError:  # swapped for something else since the stat: not a link now
            return Entry(OTHER, st.st_mode, key=key)
        return Entry(SYMLINK, st.st_mode, target, _digest(target), len(target), key)
    if stat.S_ISDIR(st.st_mode):
        return Entry(DIR, st.st_mode, key=key)
    if not stat.S_ISREG(st.st_mode):
        return Entry(OTHER, st.st_mode, None, f"{stat.S_IFMT(st.st_mode):o}", 0, key)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a link or a FIFO meanwhile
            return Entry(OTHER, st.st_mode, key=key)
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Entry(OTHER, st.st_mode, key=stat_key(st))
        if st.st_size > cap:
            # Not read (a command may leave gigabytes under a listed name): known by
            # its stat only, removable, never restorable.
            pseudo = f"large:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}"
            return Entry(FILE, st.st_mode, None, pseudo, st.st_size, stat_key(st))
        kept = bytearray()
        while len(kept) <= cap and (chunk := os.read(fd, 1 << 20)):
            kept += chunk
        content = bytes(kept) if len(kept) <= cap else None
        digest = _digest(bytes(kept))
        return Entry(FILE, st.st_mode, content, digest, len(kept), stat_key(st))
    finally:
        os.close(fd)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def remove(root: str, rel: str) -> None:
    """Remove what is at `rel` (a directory with everything in it); nothing if absent."""
    name = os.path.basename(rel)
    try:
        with parent_of(root, rel) as dir_fd:
            remove_at(dir_fd, name)
    except (FileNotFoundError, NotADirectoryError):
        return


def remove_at(dir_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        return
    fd = _openat2(dir_fd, name, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for child in os.listdir(fd):
            remove_at(fd, child)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=dir_fd)


def remove_empty_dir(root: str, rel: str) -> bool:
    """rmdir `rel` if it is an empty directory; whether it went."""
    try:
        with parent_of(root, rel) as dir_fd:
            os.rmdir(os.path.basename(rel), dir_fd=dir_fd)
            return True
    except OSError:
        return False


def put(root: str, rel: str, entry: Entry) -> None:
    """Make `rel` hold exactly `entry` (atomically for a file or a link: a temp name in the
    same directory, then a rename over whatever is there)."""
    if not entry.restorable:
        raise ValueError(f"{rel}: its content was not kept, so it cannot be put back")
    name = os.path.basename(rel)
    with parent_of(root, rel, create=True) as dir_fd:
        if entry.kind == DIR:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, entry.mode & 0o7777 or 0o755, dir_fd=dir_fd)
            return
        assert entry.content is not None
        tmp = f".{name}.agentd-{secrets.token_hex(4)}"
        if entry.kind == SYMLINK:
            os.symlink(entry.content.decode("utf-8", "surrogateescape"), tmp, dir_fd=dir_fd)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            try:
                view = memoryview(entry.content)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, entry.mode & 0o777)  # never a set-id bit from the sandbox
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            os.close(fd)
        try:
            existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            remove_at(dir_fd, name)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def rename(root: str, old: str, new: str) -> None:
    """Move `old` to `new` (both below `root`); fails if `new` exists."""
    with parent_of(root, old) as src, parent_of(root, new, create=True) as dst:
        if _exists_at(dst, os.path.basename(new)):
            raise FileExistsError(errno.EEXIST, "exists", new)
        os.rename(os.path.basename(old), os.path.basename(new), src_dir_fd=src, dst_dir_fd=dst)


def is_dir_holding(root: str, rel: str, names: tuple[str, ...]) -> bool:
    """Whether `rel` is a directory holding every one of `names` (no link followed)."""
    try:
        with parent_of(root, os.path.join(rel, "x")) as fd:
            return all(_exists_at(fd, n) for n in names)
    except OSError:
        return False


def _exists_at(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False
