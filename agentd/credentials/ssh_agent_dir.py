"""The directory of a session's own that holds its ssh-agent socket and its hosts' keys,
bound whole at /run/agentd-ssh in every sandbox of the session.

A directory, not the socket file: bwrap binds an inode, so a sandbox that outlives its
daemon (a background task taken over by the next one) would keep a socket nobody serves
any more. Bound as a directory, it sees whatever the daemon of the moment has put in it.
So the directory stays as long as the session is open and a task of it may run (a daemon
that stops leaves it to the next one), and its entries are replaced by rename, never
removed first: a sandbox connects to the old socket or to the new one, never to none.

    <session dir>/ssh-agent/     root : the session's group, 0750
        agent.sock               root : the session's group, 0660
        known_hosts              root : the session's group, 0640

Nothing in it is the sandbox's to write: the session dir is 0710 and root's, and the
sandbox sees this directory read-only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

DIR_NAME = "ssh-agent"
SOCKET_NAME = "agent.sock"
KNOWN_HOSTS_NAME = "known_hosts"
# Where the directory is shown inside every sandbox of the session.
MOUNT = "/run/agentd-ssh"
SOCKET_MOUNT = f"{MOUNT}/{SOCKET_NAME}"
# The configured hosts' keys, for the sandbox's ssh to check the host itself (git's ssh
# reads it as its global known_hosts).
KNOWN_HOSTS_MOUNT = f"{MOUNT}/{KNOWN_HOSTS_NAME}"
_NEW = ".new"


def path_in(session_dir: str) -> str:
    return os.path.join(session_dir, DIR_NAME)


def make(session_dir: str) -> str:
    """The session's agent directory, made now or taken up from an earlier daemon: a real
    directory of ours (never a link), root's and the session dir's group's."""
    path = path_in(session_dir)
    gid = os.stat(session_dir).st_gid
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o750)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{path} is not the daemon's own directory")
    if st.st_gid != gid:
        os.chown(path, os.geteuid(), gid, follow_symlinks=False)
    if stat.S_IMODE(st.st_mode) != 0o750:
        os.chmod(path, 0o750, follow_symlinks=False)
    return path


def listen(directory: str) -> socket.socket:
    """A listening socket at `directory`/agent.sock, put in place of any there before
    (an earlier daemon's) in one rename."""
    gid = os.stat(directory).st_gid
    final = os.path.join(directory, SOCKET_NAME)
    new = final + _NEW
    with contextlib.suppress(FileNotFoundError):
        os.unlink(new)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(new)
        # The directory's group (the session's own when the daemon is root): that
        # session's sandboxes connect, no other's.
        os.chown(new, os.geteuid(), gid)
        os.chmod(new, 0o660)
        sock.listen(64)
        sock.setblocking(False)
        os.rename(new, final)
    except OSError:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(new)
        raise
    return sock


def write_known_hosts(directory: str, text: str) -> None:
    """The configured hosts' keys, written whole and renamed into place."""
    gid = os.stat(directory).st_gid
    final = os.path.join(directory, KNOWN_HOSTS_NAME)
    new = final + _NEW
    with contextlib.suppress(FileNotFoundError):
        os.unlink(new)
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchown(f.fileno(), os.geteuid(), gid)
            os.fchmod(f.fileno(), 0o640)
            f.write(text)
        os.rename(new, final)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(new)
        raise


def remove_known_hosts(directory: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, KNOWN_HOSTS_NAME))


def remove(session_dir: str) -> None:
    """The session's agent directory and all it holds (only the daemon writes there)."""
    path = path_in(session_dir)
    for name in (SOCKET_NAME, KNOWN_HOSTS_NAME, SOCKET_NAME + _NEW, KNOWN_HOSTS_NAME + _NEW):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(os.path.join(path, name))
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.rmdir(path)
