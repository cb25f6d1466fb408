"""A session's temp dir as a tmpfs of its own: sized, and RAM its own commands pay for.

The temp dir (<base>/<session>/tmp, agentd/sessions/dirs.py; $TMPDIR in the sandbox)
is kept between calls, so it cannot be one of bwrap's per-sandbox tmpfs mounts. A root
daemon mounts a tmpfs of `session_tmp_bytes` on it once, on the host; the pages a
sandboxed command writes there are charged to that command's control group, the
session's, so what the temp dir holds counts in the session's memory and no more than
its size fits. It is unmounted before the directory is removed (the session closed or
was reaped).

The mount goes on the directory opened without following a link, through its
descriptor (`/proc/self/fd/N`, which the kernel resolves to that very directory), never
through its path. Mounts live in the daemon's mount namespace: under systemd
(ProtectSystem=, PrivateMounts=) a restarted daemon gets a fresh, empty temp dir for
each session, while the tasks that outlived the restart keep the one they had.

A daemon that is not root, or may not mount (no CAP_SYS_ADMIN), leaves temp dirs on
the disk they are on, unsized, and says so once.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterator

from agentd.fs import trees
from agentd_sandbox import linux

log = logging.getLogger(__name__)

_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TmpMounts:
    """The daemon's mounting of temp dirs: one per daemon, made by its assembly. Only a
    running daemon mounts (it also unmounts); tools and benches that build a policy
    without one pass None and leave temp dirs plain directories."""

    def __init__(self) -> None:
        # Why this daemon cannot mount temp dirs (None: it can, or has not tried yet).
        self.unavailable: str | None = None

    def is_sized(self, path: str) -> bool:
        """Whether `path` needs nothing more: it is a mount of its own (ours), or no
        mount is to be made (this daemon cannot mount)."""
        if self.unavailable is not None or os.geteuid() != 0:
            return True
        try:
            st = os.lstat(path)
            return st.st_dev != os.lstat(os.path.dirname(path)).st_dev
        except OSError:
            return False

    def size(
        self, path: str, size_bytes: int, ident: tuple[int, int] | None, mode: int = 0o700
    ) -> None:
        """Mount a tmpfs of `size_bytes` on the directory `path` (owned by `ident`, or by
        us; its root then `ident`'s with `mode`), unless one is there already. A refused
        mount is logged once and leaves the directory as it is."""
        if self.unavailable is not None or os.geteuid() != 0:
            return
        uid, gid = ident if ident is not None else (os.getuid(), os.getgid())
        with _opened(path) as (fd, parent_dev):
            st = os.fstat(fd)
            if st.st_dev != parent_dev:
                return  # a mount already: ours, made by an earlier call or daemon
            if st.st_uid != uid:
                raise PermissionError(f"{path} is not owned by uid {uid}: not mounting on it")
            options = f"size={size_bytes},mode={mode:o},uid={uid},gid={gid}".encode()
            target = f"/proc/self/fd/{fd}".encode()
            try:
                linux.mount("tmpfs", target, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, options)
            except OSError as exc:
                err = exc.errno or 0
                if err not in (errno.EPERM, errno.EACCES):
                    raise OSError(
                        err, f"cannot mount the session's temp dir: {os.strerror(err)}"
                    ) from exc
                self.unavailable = os.strerror(err)
                log.warning(
                    "cannot mount a sized tmpfs on sessions' temp dirs (%s): they stay "
                    "unsized on their disk; run agentd as root with CAP_SYS_ADMIN to size them",
                    self.unavailable,
                )


def unmount(path: str) -> None:
    """Unmount what is mounted on the directory `path` (lazily: a task still running in
    it keeps its view until it ends); nothing if it is a plain directory or gone."""
    for _ in range(8):  # a mount stacked on another (two daemons raced) comes off too
        try:
            with _opened(path) as (fd, parent_dev):
                if os.fstat(fd).st_dev == parent_dev:
                    return
                try:
                    linux.umount2(f"/proc/self/fd/{fd}", linux.MNT_DETACH)
                except OSError as exc:
                    log.warning("cannot unmount %s: %s", path, exc.strerror)
                    return
        except OSError:
            return


def remove(path: str) -> bool:
    """Unmount, then delete the session's temp dir; False if it was not there."""
    unmount(path)
    return trees.remove_tree(path)


@contextlib.contextmanager
def _opened(path: str) -> Iterator[tuple[int, int]]:
    """(an O_PATH descriptor of the directory `path`, its parent's device), opened
    without following a link in either."""
    parent_fd = os.open(os.path.dirname(path), _FLAGS)
    try:
        fd = os.open(os.path.basename(path), _FLAGS, dir_fd=parent_fd)
        try:
            yield fd, os.fstat(parent_fd).st_dev
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)
