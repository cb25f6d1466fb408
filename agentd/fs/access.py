"""Paths as a session sees them, opened so that no symlink carries them outside its roots.

A string check on a path cannot stop `ws/link -> /etc`: the kernel must resolve it.
Every open goes through openat2(2) with RESOLVE_BENEATH from a descriptor of the
workspace root, so `..` and symlinks (at any depth) that leave the root fail with
EXDEV, whatever the path looks like.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from agentd.foundation.errors import InputError, PathOutsideWorkspace, ToolError
from agentd.fs.identity import FsIdentity, acting_as, current_identity
from agentd.fs.temp_ledger import TempLedger, remove_left_temp
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS


def expand(raw: str, cwd: str, home: str) -> str:
    """The absolute, lexically normalised path of `raw` as the session means it."""
    if "\0" in raw:
        raise InputError(f"The path {raw!r} contains a NUL byte; no file has such a name.")
    # Models leave a space or a line break after a path; the reference drops them too.
    raw = raw.strip()
    if raw == "~" or raw.startswith("~/"):
        raw = home + raw[1:]
    path = raw if os.path.isabs(raw) else os.path.join(cwd, raw)
    return os.path.normpath(path)


def display_path(path: str, cwd: str) -> str:
    """`path` relative to the cwd when it lies under it, as listings show paths."""
    rel = os.path.relpath(path, cwd)
    return path if rel == ".." or rel.startswith("../") else rel


@dataclass(frozen=True, slots=True)
class Located:
    """An absolute path and the root it lies in, split for openat2."""

    path: str
    root: str
    rel: str  # "." for the root itself
    # Whose permissions every access to it is made with; None: the daemon's own.
    identity: FsIdentity | None = None


def locate(
    path: str,
    roots: Iterable[str],
    identity: FsIdentity | None = None,
    daemon_roots: Iterable[str] = (),
) -> Located:
    """The root that lexically holds `path`; raises PathOutsideWorkspace when none does.

    Files under it are then touched as `identity`, except under `daemon_roots` (the
    daemon's own state, which no sandbox can write).
    """
    roots = list(roots)
    best: str | None = None
    for root in roots:
        root = os.path.normpath(root)
        if (path == root or path.startswith(root.rstrip("/") + "/")) and (
            best is None or len(root) > len(best)
        ):
            best = root
    if best is None:
        raise PathOutsideWorkspace(path, roots)
    rel = os.path.relpath(path, best)
    if best in {os.path.normpath(r) for r in daemon_roots}:
        identity = None
    if rel == "." and best != "/":
        with acting_as(identity):
            is_file = os.path.lexists(best) and not os.path.isdir(best)
        if is_file:
            # A granted file, not a directory: open it beneath its own directory, by its
            # name alone (openat2 needs a directory to start from).
            return Located(path, os.path.dirname(best), os.path.basename(best), identity)
    return Located(path, best, rel, identity)


def _openat2(dir_fd: int, rel: str, flags: int, mode: int = 0o666) -> int:
    return linux.openat2(dir_fd, rel, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)


def open_beneath(loc: Located, flags: int, mode: int = 0o666) -> int:
    """Open `loc` with `flags`, as its identity, refusing any resolution that leaves its root.

    RESOLVE_BENEATH refuses every absolute symlink, even one that points back inside
    the root; for those we resolve the path and open the result, again beneath the
    root, so a symlink swapped in meanwhile still cannot lead out.
    """
    with acting_as(loc.identity):
        return _open_beneath(loc, flags, mode)


def _open_beneath(loc: Located, flags: int, mode: int) -> int:
    root_fd = os.open(loc.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            return _openat2(root_fd, loc.rel, flags, mode)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        real = os.path.realpath(loc.path)
        if real != loc.root and not real.startswith(loc.root.rstrip("/") + "/"):
            raise PathOutsideWorkspace(loc.path, [loc.root])
        try:
            return _openat2(root_fd, os.path.relpath(real, loc.root), flags, mode)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise PathOutsideWorkspace(loc.path, [loc.root]) from None
            raise
    finally:
        os.close(root_fd)


def check_inside(loc: Located) -> None:
    """Raise PathOutsideWorkspace if the existing part of `loc` resolves outside its root."""
    probe = loc
    while True:
        try:
            os.close(open_beneath(probe, os.O_PATH))
            return
        except FileNotFoundError:
            parent = os.path.dirname(probe.rel)
            if probe.rel in (".", "") or not parent:
                return
            probe = Located(os.path.dirname(probe.path), probe.root, parent, probe.identity)
        except NotADirectoryError:
            return


def stat_beneath(loc: Located) -> os.stat_result:
    fd = open_beneath(loc, os.O_PATH)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def open_dir_nofollow(root_fd: int, rel: str) -> int:
    """A directory below `root_fd` opened for listing, refused if any part of `rel` is a
    symlink (a directory swapped for one mid-walk is never followed)."""
    return linux.openat2(
        root_fd,
        rel or ".",
        os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK,
        resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
    )


def read_bytes(loc: Located, limit: int | None = None) -> bytes:
    """The file's bytes, at most `limit`; refuses anything that is not a regular file."""
    fd = open_beneath(loc, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", loc.path)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", loc.path)
        chunks: list[bytes] = []
        remaining = limit if limit is not None else -1
        while remaining != 0:
            chunk = os.read(fd, 1 << 20 if remaining < 0 else min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if remaining > 0:
                remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@contextmanager
def _parent_dir_fd(loc: Located, create: bool) -> Iterator[int]:
    """A descriptor of the directory holding `loc`, made (mode 0777 & umask) when `create`."""
    root_fd = os.open(loc.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = root_fd
    try:
        parts = [p for p in os.path.dirname(loc.rel).split("/") if p and p != "."]
        for part in parts:
            try:
                nfd = _openat2(fd, part, os.O_PATH | os.O_DIRECTORY)
            except FileNotFoundError:
                if not create:
                    raise
                made = False
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                    made = True
                if made:
                    _give_to_directory_owner(fd, part)
                nfd = _openat2(fd, part, os.O_PATH | os.O_DIRECTORY)
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise PathOutsideWorkspace(loc.path, [loc.root]) from None
                raise
            if fd != root_fd:
                os.close(fd)
            fd = nfd
        yield fd
    finally:
        if fd != root_fd:
            os.close(fd)
        os.close(root_fd)


def write_atomic(
    loc: Located, data: bytes, ledger: TempLedger | None, *, create_parents: bool = True
) -> None:
    """Replace the file at `loc` with `data`: a crash leaves the old content or the new, never half.

    Temp file in the same directory, fsync, rename over the target, fsync the
    directory. An existing file keeps its mode (and owner, when we may set it). All of
    it as `loc`'s identity: a new file belongs to that identity. `ledger`: where the
    temp file is recorded first (the daemon's; None: nowhere).
    """
    with acting_as(loc.identity):
        _write_atomic(loc, data, ledger, create_parents)


def _write_atomic(
    loc: Located, data: bytes, ledger: TempLedger | None, create_parents: bool
) -> None:
    name = os.path.basename(loc.rel)
    if not name or name in (".", ".."):
        raise IsADirectoryError(errno.EISDIR, "is a directory", loc.path)
    with _parent_dir_fd(loc, create_parents) as dir_fd:
        try:
            old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            # Write through a symlink only while its target stays inside the root.
            target = open_beneath(loc, os.O_PATH)
            try:
                real = os.readlink(f"/proc/self/fd/{target}")
            finally:
                os.close(target)
            inner = locate(real, [loc.root])
            inner_loc = Located(inner.path, inner.root, inner.rel, loc.identity)
            _write_atomic(inner_loc, data, ledger, False)
            return
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", loc.path)
        tmp = f".{name}.agentd-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~_umask()
        # Recorded before it exists, so a crash before the rename cannot leave it for good.
        rel_dir = os.path.dirname(loc.rel)
        try:
            token = ledger.begin(loc.root, rel_dir, tmp, loc.identity) if ledger else ""
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise ToolError(
                f"{loc.path} was not written: agentd's state disk is full (it records each "
                "write there first, so that a crash cannot leave a temp file behind). "
                "Tools that only read still work."
            ) from None
        try:
            write_temp_and_rename(dir_fd, tmp, name, mode, old, data, ledger, token)
        finally:
            if ledger:
                ledger.done(token)
        dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_temp_and_rename(
    dir_fd: int,
    tmp: str,
    name: str,
    mode: int,
    old: os.stat_result | None,
    data: bytes,
    ledger: TempLedger | None,
    token: str,
) -> None:
    """`data` written whole to the new temp file `tmp` in `dir_fd` (noted in `ledger`),
    its mode and owner (those of `old`, the file it replaces, if any) set, fsynced, and
    renamed over `name`; the temp file removed on any failure."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        try:
            if ledger:
                ledger.made(token, os.fstat(fd))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                with suppress(PermissionError):
                    os.fchown(fd, old.st_uid, old.st_gid)
            elif old is None:
                _give_to_directory_owner(dir_fd, tmp)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


@contextmanager
def directory_beneath(root: str, rel_dir: str, identity: FsIdentity | None) -> Iterator[int]:
    """A descriptor of `rel_dir` beneath `root`, opened and used as `identity` (no
    symlink leads out, none is created); for removing a temp file a crash left."""
    loc = Located(os.path.join(root, rel_dir), root, os.path.join(rel_dir or ".", "x"), identity)
    with acting_as(identity), _parent_dir_fd(loc, False) as fd:
        yield fd


def remove_left_temps(ledger: TempLedger) -> int:
    """Remove the temp files of writes a crash interrupted (see templedger)."""

    def remove(entry: dict[str, Any]) -> bool:
        ident = FsIdentity(*entry["as"]) if entry.get("as") else None
        return remove_left_temp(entry, lambda r, d, _: directory_beneath(r, d, ident))

    return ledger.sweep(remove)


def _give_to_directory_owner(dir_fd: int, name: str) -> None:
    """A root daemon's new file or directory belongs to whoever owns the directory it is
    made in: the sandboxed commands of that workspace's user can then change it. (Acting
    as a session's identity, the file is that identity's already.)"""
    if os.geteuid() != 0 or current_identity() is not None:
        return
    parent = os.fstat(dir_fd)
    if parent.st_uid != 0 or parent.st_gid != 0:
        os.chown(name, parent.st_uid, parent.st_gid, dir_fd=dir_fd, follow_symlinks=False)


def _umask() -> int:
    # Read, not set-and-restore: os.umask(0) would let any file another thread creates
    # meanwhile (writes run in worker threads) come out world-writable.
    try:
        # Bytes: a codec looked up here would be imported as the session's identity,
        # which may not read the interpreter's own files.
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask
