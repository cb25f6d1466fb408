"""Measuring and deleting directory trees that sandboxed commands may have written.

A session's temp dir and output dir can hold anything a command made: symlinks to
/etc, FIFOs, deep trees, names reused while we walk. The daemon is root, so it never
follows a symlink and never reopens by name what it checked: the parent is opened
with O_NOFOLLOW, and the tree is deleted by descriptor below it (shutil.rmtree's
fd-based walk, which refuses to start on a symlink and re-checks each directory it
enters; `shutil.rmtree.avoids_symlink_attacks` says it is available here).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> bool:
    """Delete `path` (a directory tree, a file or a symlink itself) without following a
    symlink anywhere; False if it was not there. Errors on single entries are logged
    once and the rest is still removed."""
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux always has it
        raise RuntimeError("this platform's rmtree can follow symlinks; refusing to delete")
    parent, name = os.path.split(path.rstrip("/"))
    try:
        parent_fd = os.open(parent or "/", _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the parent itself is a symlink now
            log.warning("not deleting %s: its directory %s is a symlink", path, parent)
            return False
        raise
    try:
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent_fd)
            return True
        errors: list[str] = []

        def note(_func: object, failed: str, exc_info: object) -> None:
            errors.append(f"{failed}: {exc_info[1] if isinstance(exc_info, tuple) else exc_info}")

        shutil.rmtree(name, dir_fd=parent_fd, onerror=note)
        if errors:
            log.warning(
                "could not delete all of %s (%d errors; first: %s)", path, len(errors), errors[0]
            )
        return True
    finally:
        os.close(parent_fd)


def tree_bytes(path: str) -> int:
    """Bytes of disk the tree at `path` takes (blocks, so sparse files count what they
    use), walked by descriptor without following symlinks; 0 if it is not there."""
    total = 0
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_blocks * 512
    try:
        walk = os.fwalk(path, follow_symlinks=False)
        for _dir, _subdirs, files, dir_fd in walk:
            total += os.fstat(dir_fd).st_blocks * 512
            for name in files:
                try:
                    total += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_blocks * 512
                except FileNotFoundError:
                    continue
    except OSError as exc:
        log.info("could not measure all of %s: %s", path, exc)
    return total
