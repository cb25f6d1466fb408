"""Making one path beneath a root what an image says, as the session's identity, never
through a link.

Every directory on the way is opened beneath the root with no link resolved
(RESOLVE_NO_SYMLINKS): a link a sandbox planted where a directory was is refused, never
followed; a missing one is made. The last name is replaced, not followed: a file or a
link is written under a temp name in its directory (recorded in the temp ledger first,
as the file tools write), given its exact mode, synced and renamed over the name, so a
link there is replaced by the file and a crash leaves the old entry or the new one. A
directory in the way is removed by descriptor (fs/trees.py's walk, which follows no
link).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator

from agentd.changes import images
from agentd.changes.images import Image
from agentd.fs.access import write_temp_and_rename
from agentd.fs.identity import FsIdentity, acting_as
from agentd.fs.temp_ledger import TempLedger
from agentd_sandbox import linux
from agentd_sandbox.linux import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS

_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


class Refused(Exception):
    """The path cannot be made so safely; the message says why."""


@contextlib.contextmanager
def _parent(root: str, rel: str, create: bool) -> Iterator[int]:
    """The directory holding `rel`, opened (made, when `create`) with no link followed."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in [p for p in os.path.dirname(rel).split("/") if p]:
            try:
                nfd = linux.openat2(fd, part, os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nfd = linux.openat2(fd, part, os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
                    raise Refused(f"a directory on its path ({part}) is a link or a file") from None
                raise
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove(dir_fd: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # by descriptor, no link followed
    else:
        os.unlink(name, dir_fd=dir_fd)


def put(
    root: str,
    rel: str,
    image: Image,
    data: bytes | None,
    identity: FsIdentity | None,
    ledger: TempLedger | None,
) -> None:
    """Make `rel` what `image` says (`data`: a file's content); Refused or OSError."""
    with acting_as(identity):
        try:
            with _parent(root, rel, create=image["kind"] != images.NONE) as dir_fd:
                _put(dir_fd, root, rel, image, data, identity, ledger)
        except FileNotFoundError:
            if image["kind"] != images.NONE:
                raise  # else: its directory is gone, and so is it


def sync_dirs(root: str, rels: set[str], identity: FsIdentity | None) -> None:
    """Make the renames in these directories durable: one fsync per directory after a
    restore, not one per file (a crash before it loses whole renames, never half a
    file)."""
    with acting_as(identity):
        for rel in sorted(rels):
            try:
                with _parent(root, os.path.join(rel, "x"), create=False) as fd:
                    os.fsync(fd)
            except (OSError, Refused):
                continue  # gone or replaced meanwhile: nothing of ours to sync there


def _put(
    dir_fd: int,
    root: str,
    rel: str,
    image: Image,
    data: bytes | None,
    identity: FsIdentity | None,
    ledger: TempLedger | None,
) -> None:
    kind, name = image["kind"], os.path.basename(rel)
    old = _lstat(dir_fd, name)
    if kind == images.NONE:
        if old is not None:
            _remove(dir_fd, name, old)
    elif kind == images.DIR:
        if old is not None and not stat.S_ISDIR(old.st_mode):
            _remove(dir_fd, name, old)
            old = None
        if old is None:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        fd = linux.openat2(dir_fd, name, os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)
        try:
            os.fchmod(fd, image.get("mode", 0o755) & 0o7777)
        finally:
            os.close(fd)
    elif kind in (images.FILE, images.LINK):
        if old is not None and stat.S_ISDIR(old.st_mode):
            _remove(dir_fd, name, old)
        _replace(root, rel, dir_fd, name, image, data, identity, ledger)
    else:
        raise Refused(image.get("why") or "not restorable")


def _replace(
    root: str,
    rel: str,
    dir_fd: int,
    name: str,
    image: Image,
    data: bytes | None,
    identity: FsIdentity | None,
    ledger: TempLedger | None,
) -> None:
    tmp = f".{name[:200]}.agentd-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    token = ledger.begin(root, os.path.dirname(rel), tmp, identity) if ledger else ""
    try:
        if image["kind"] == images.LINK:
            os.symlink(image.get("target", ""), tmp, dir_fd=dir_fd)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        elif data is None:
            raise Refused("its stored copy is missing")
        else:
            mode = image.get("mode", 0o644) & 0o7777
            write_temp_and_rename(dir_fd, tmp, name, mode, None, data, ledger, token)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    finally:
        if ledger:
            ledger.done(token)
