"""Each session's directories on the host: its sandbox temp dir and its output files.

A predictable name in a directory every local user may write (/tmp/agentd-<uid>) would
let whoever made it first (any other user) stop every Bash call of that uid's sessions.
So they live under a base this daemon made itself, with a name no one can guess before (mkdtemp:
created with O_EXCL), checked each time a daemon takes it up (a directory, not a link,
the daemon user's own, mode 0711, its `.owner` naming this state dir), and recorded in
the daemon's private state dir so that the next daemon finds it again:

    /tmp/agentd-XXXXXXXX/        the daemon's, 0711; .owner holds its state dir
        <session id>/            root : the session's group, 0710
            tmp/                 root : the session's group, 0770   ($TMPDIR; HOME inside)
            output/              root : the session's group, 0750   (output files, 0640)
            review/              root : the session's group, 0710   (review mode's overlay
                                 views, one per call while it runs: agentd/fs/overlay.py)
            ssh-agent/           root : the session's group, 0750   (the sandbox's ssh-agent
                                 socket and known_hosts: agentd/credentials/ssh_agent_dir.py)

Owned by root and the session's own group (agentd/sessions/gids.py), each session's
directory admits that session's sandbox and no other, even one of the same uid that a
wrong bind showed it to. (A daemon that is not root makes them its own, 0700: its
sandboxes all run as itself.)

The base stays in /tmp, not in the 0700 state dir, because bwrap, which runs as the
sandbox identity, resolves each bind's path by name (even a descriptor's; it then checks
that the inode it mounted is the descriptor's), so that identity must be able to walk
to these directories: 0711 lets it walk, not list.

Which daemon made each session's directory is recorded in the owners dir
(agentd/sessions/tmp_owners.py): the next daemon to start removes those of a daemon gone
for good, and the base with the last of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import tempfile
import threading

from agentd.foundation.privdir import ensure_private_dir
from agentd.fs import tmpfs, trees

log = logging.getLogger(__name__)

PARENT = "/tmp"
PREFIX = "agentd-"
OWNER_NAME = ".owner"
# The record, in the state dir, of where this daemon's base is.
RECORD_NAME = "session-dirs"
BASE_MODE = 0o711
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SessionDirs:
    """The directories of one daemon's sessions (see the module docstring)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = os.path.realpath(state_dir)
        self._base: str | None = None
        # The base last found ours, held open (so its inode stays its own) with its
        # device and inode: while its path still names that directory, it is still ours.
        self._held: tuple[int, int, int] | None = None
        self._lock = threading.Lock()

    # ---- where ----
    def base(self) -> str:
        """This daemon's base, taken up from its record or made now."""
        with self._lock:
            if self._base is not None and self._still_held(self._base):
                return self._base
            if self._base is None or not _is_ours(self._base, self.state_dir):
                self._base = self._recorded() or self._make_base()
            self._hold(self._base)
            return self._base

    def existing_base(self) -> str | None:
        """This daemon's base if it has one already (none is made)."""
        with self._lock:
            return self._base or self._recorded()

    def _still_held(self, path: str) -> bool:
        """`path` is still the directory checked last: the same inode, ours, 0711. No one
        else can write in it (0711, ours), so its .owner is still the one read then."""
        if self._held is None:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return (
            (st.st_dev, st.st_ino) == self._held[1:]
            and stat.S_ISDIR(st.st_mode)
            and st.st_uid == os.geteuid()
            and stat.S_IMODE(st.st_mode) == BASE_MODE
        )

    def _hold(self, path: str) -> None:
        """Holds `path`, just found ours, if it is still that directory."""
        self._let_go()
        try:
            fd = os.open(path, _DIR_FLAGS)
        except OSError:
            return
        st = os.fstat(fd)
        self._held = (fd, st.st_dev, st.st_ino)
        if not _is_ours(path, self.state_dir) or not self._still_held(path):
            self._let_go()

    def _let_go(self) -> None:
        if self._held is not None:
            os.close(self._held[0])
            self._held = None

    def session_path(self, session_id: str) -> str:
        return os.path.join(self.base(), _checked(session_id))

    def tmp_path(self, session_id: str) -> str:
        return os.path.join(self.session_path(session_id), "tmp")

    def output_path(self, session_id: str) -> str:
        return os.path.join(self.session_path(session_id), "output")

    # ---- made ----
    def tmp_dir(self, session_id: str, gid: int | None) -> str:
        """The session's temp dir, made if need be: its sandbox's group `gid` may write
        it; the sandbox's uid has no more right to it than any other."""
        return self._make(session_id, "tmp", gid, 0o770)

    def output_dir(self, session_id: str, gid: int | None) -> str:
        """The session's output dir, made if need be: its sandbox's group may read it."""
        return self._make(session_id, "output", gid, 0o750)

    def review_dir(self, session_id: str, gid: int | None) -> str:
        """Where the session's review-mode views are mounted (agentd/fs/overlay.py): its
        sandbox's group walks to them."""
        return self._make(session_id, "review", gid, 0o710)

    def _make(self, session_id: str, name: str, gid: int | None, mode: int) -> str:
        top = self.session_path(session_id)
        base_fd = os.open(os.path.dirname(top), _DIR_FLAGS)
        try:
            top_fd = _mkdir_at(base_fd, os.path.basename(top), gid, 0o710)
            try:
                os.close(_mkdir_at(top_fd, name, gid, mode))
            finally:
                os.close(top_fd)
        finally:
            os.close(base_fd)
        return os.path.join(top, name)

    # ---- removed ----
    def remove_session(self, session_id: str) -> int:
        """Everything the session had here (its temp dir and output files)."""
        return trees.remove_tree(self.session_path(session_id))

    def remove_all(self) -> None:
        """Every session's directory here and the base: a daemon that is gone (a test's),
        its temp dirs' mounts undone first. Nothing if it never made a base."""
        with self._lock:
            path = self._base or self._recorded()
            self._base = None
            self._let_go()
        if path is None:
            return
        with contextlib.suppress(OSError):
            for name in os.listdir(path):
                if name != OWNER_NAME:
                    tmpfs.unmount(os.path.join(path, name, "tmp"))
        trees.remove_tree(path)

    def remove_base(self) -> bool:
        """The base, if it holds no session's directory any more (a stopped daemon's)."""
        with self._lock:
            path = self._base or self._recorded()
            self._base = None
            self._let_go()
        return path is not None and remove_if_empty(path)

    # ---- the base ----
    def _record_path(self) -> str:
        return os.path.join(self.state_dir, RECORD_NAME)

    def _recorded(self) -> str | None:
        try:
            fd = os.open(self._record_path(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        with os.fdopen(fd) as f:
            path = f.read(4096).strip()
        if os.path.dirname(path) != PARENT or not _is_ours(path, self.state_dir):
            return None
        with contextlib.suppress(OSError):
            # Taken up: tmpfiles' age-based cleaning of /tmp must not take it for stale.
            os.utime(os.path.join(path, OWNER_NAME), follow_symlinks=False)
        return path

    def _make_base(self) -> str:
        ensure_private_dir(self.state_dir, "state dir")  # the record goes there
        path = tempfile.mkdtemp(prefix=PREFIX, dir=PARENT)  # O_EXCL: never someone's
        os.chmod(path, BASE_MODE)
        owner = os.path.join(path, OWNER_NAME)
        fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(self.state_dir + "\n")
        tmp = self._record_path() + ".new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(path + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._record_path())
        log.info("sessions' temp and output dirs are under %s", path)
        return path


_all: dict[str, SessionDirs] = {}
# The same, by the name each caller gave (a daemon's state dir does not move under it).
_named: dict[str, SessionDirs] = {}
_all_lock = threading.Lock()


def of(state_dir: str) -> SessionDirs:
    """The session directories of the daemon whose state dir is `state_dir` (one object
    per state dir, so every part of the daemon agrees on the base)."""
    found = _named.get(state_dir)  # every call of a tool asks: no realpath walk each time
    if found is not None:
        return found
    key = os.path.realpath(state_dir)
    with _all_lock:
        if key not in _all:
            _all[key] = SessionDirs(key)
        _named[state_dir] = _all[key]
        return _all[key]


def _checked(session_id: str) -> str:
    """A session id as one path component (ids are uuid hex; tests use short names)."""
    if not re.fullmatch(r"[\w-][\w.-]{0,63}", session_id):
        raise ValueError(f"not a session id: {session_id!r}")
    return session_id


def _mkdir_at(dir_fd: int, name: str, gid: int | None, mode: int) -> int:
    """`name` in `dir_fd` as a directory of root (or ours) and `gid`, `mode` (0700 without
    a group); made if missing. Its descriptor. Only the daemon writes where it is made,
    so what is there is the daemon's own: a directory, never a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        want_gid = st.st_gid if gid is None else gid
        want_mode = 0o700 if gid is None else mode
        if (st.st_uid, st.st_gid) != (os.geteuid(), want_gid):
            os.fchown(fd, os.geteuid(), want_gid)
        if stat.S_IMODE(st.st_mode) != want_mode:
            os.fchmod(fd, want_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_ours(path: str, state_dir: str) -> bool:
    """A base this daemon made: a directory (no link), ours, 0711, .owner naming us."""
    owner = _owner_of(path)
    return owner is not None and owner[0] == state_dir


def _owner_of(path: str) -> tuple[str, float] | None:
    """(the state dir named by `path`'s .owner, its mtime) if `path` is a base a daemon
    of our user made (a directory, not a link, ours, mode 0711); else None."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != BASE_MODE:
            return None
        owner_fd = os.open(OWNER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(owner_fd) as f:
        ost = os.fstat(f.fileno())
        if not stat.S_ISREG(ost.st_mode) or ost.st_uid != os.geteuid():
            return None
        text = f.read(4096).strip()
    return (text, ost.st_mtime) if os.path.isabs(text) else None


def remove_if_empty(base: str) -> bool:
    """Remove `base`, a base a daemon of our user made, if only its .owner is left in it
    (the last session's directory went); whether it went."""
    if _owner_of(base) is None:
        return False
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError:
        return False
    try:
        if os.listdir(fd) != [OWNER_NAME]:
            return False
        os.unlink(OWNER_NAME, dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(base)
    return not os.path.lexists(base)
