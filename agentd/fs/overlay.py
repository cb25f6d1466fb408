"""A copy-on-write view of a workspace root: an overlay mount the daemon (root) makes for
one call in review mode, whose writes land in an upper directory instead of the root.

bubblewrap 0.8 has no overlay options, and an overlay mounted inside the sandbox's own
user namespace would live in a mount namespace the daemon cannot reach afterwards. So
the daemon mounts it in its own namespace, and the sandbox binds its root by descriptor
over the workspace root (agentd_sandbox/bwrap.py, Role.VIEW):

    <dir>/             root, 0711: the sandbox identity walks to `merged`, lists nothing
        merged/        the overlay's root (its mount point)
        layers/        a tmpfs of root's, 0700: nothing of the sandbox reaches it directly
            upper/     what the command wrote: files, whiteouts, opaque directories
            work/      the overlay's own

The lower layer is the root opened with no link on its way and named to the kernel by
descriptor (/proc/self/fd/N), so a link planted on the root's path is never followed.
The upper directory takes the root's owner and mode (the view's root shows them). The
layers are a sized tmpfs: what a command writes is bounded (no more than a change set
can store), charged to its own control group as memory, and never fills the disk the
daemon's state is on.
Redirects, metacopy and the index are off: the upper holds whole files and plain
names, all a reader of the change set (agentd/changes/upper.py) needs to understand.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass

from agentd.fs import trees
from agentd_sandbox import anchored, linux

_OPTIONS = "redirect_dir=off,metacopy=off,index=off,xino=off"


@dataclass(frozen=True)
class View:
    """One root's view: where it is mounted and where its writes go."""

    root: str
    dir: str

    @property
    def merged(self) -> str:
        return os.path.join(self.dir, "merged")

    @property
    def upper(self) -> str:
        return os.path.join(self.dir, "layers", "upper")

    @property
    def work(self) -> str:
        return os.path.join(self.dir, "layers", "work")


def mount(root: str, at: str, upper_bytes: int) -> View:
    """Mount a view of `root` in the fresh directory `at` (made here, 0711, the
    daemon's), whose writes may take `upper_bytes`; OSError when the kernel refuses
    (the directories are removed again)."""
    for path in (":", ","):
        if path in at:
            raise OSError(errno.EINVAL, f"a view's directory may not hold {path!r}: {at}")
    view = View(root, at)
    os.mkdir(at, 0o711)
    os.chmod(at, 0o711)
    try:
        os.mkdir(view.merged, 0o700)
        layers = os.path.dirname(view.upper)
        os.mkdir(layers, 0o700)
        flags = linux.MS_NOSUID | linux.MS_NODEV
        linux.mount("tmpfs", layers, "tmpfs", flags, f"size={upper_bytes},mode=700,uid=0,gid=0")
        os.mkdir(view.work, 0o700)
        lower = anchored.open_path(root, os.O_PATH | os.O_DIRECTORY)
        try:
            st = os.fstat(lower)
            os.mkdir(view.upper, 0o700)
            os.chown(view.upper, st.st_uid, st.st_gid, follow_symlinks=False)
            os.chmod(view.upper, st.st_mode & 0o7777, follow_symlinks=False)
            options = f"lowerdir=/proc/self/fd/{lower},upperdir={view.upper},"
            options += f"workdir={view.work},{_OPTIONS}"
            linux.mount("overlay", view.merged, "overlay", flags, options)
        finally:
            os.close(lower)
    except BaseException:
        remove(view)
        raise
    return view


def unmount(view: View) -> None:
    """Detach the view: the sandbox has ended, nothing writes through it any more."""
    with contextlib.suppress(OSError):
        linux.umount2(view.merged, linux.MNT_DETACH)


def remove(view: View) -> None:
    """The view's directories, its layers included (each unmounted first)."""
    unmount(view)
    with contextlib.suppress(OSError):
        linux.umount2(os.path.dirname(view.upper), linux.MNT_DETACH)
    trees.remove_tree(view.dir)
