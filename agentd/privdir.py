"""The daemon's own directories (socket, state): private, and never taken from anyone.

The daemon never changes the mode or owner of a directory it did not create. A
directory it needs is created 0700 when missing; an existing one is used only if it
belongs to the daemon's user and no one else may write to it. A shared directory
(/tmp, a group-writable one, another user's) is refused with a message naming a
path that works: chmod-ing /tmp to 0700 would break every other user of the machine,
and moving the socket somewhere else on our own would leave clients looking for it
where they were told it is.
"""

from __future__ import annotations

import contextlib
import os
import stat

from agentd.errors import ConfigError


def describe_mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}"


def ensure_private_dir(
    path: str,
    what: str,
    *,
    readable_by_others: bool = False,
    owner: tuple[int, int] | None = None,
) -> None:
    """Make `path` if it is missing (0700); else check that it is the daemon user's own.

    `readable_by_others` allows an existing directory that others may list and read
    but not write (a socket's directory: the socket itself is 0600). `owner` (uid, gid)
    is who a new directory is given to and who an existing one must belong to, when
    that is not the daemon's user. Raises ConfigError with one line saying what to do.
    """
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)  # the umask can only take bits away: this is 0700 or less
        if owner is not None:
            os.chown(path, *owner)
        return
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what} {path} exists and is not a directory")
    if st.st_uid != (owner[0] if owner is not None else os.geteuid()):
        raise ConfigError(
            f"{what} {path} belongs to another user ({describe_mode(st)}); agentd will not "
            f"use it. Choose a path of your own, e.g. {suggestion(path)}"
        )
    if st.st_mode & 0o022:
        raise ConfigError(
            f"{what} {path} is shared ({describe_mode(st)}: others may write to it); agentd "
            f"will not use it or change its mode. Use a directory of your own, e.g. "
            f"{suggestion(path)} (agentd creates it 0700)"
        )
    if st.st_mode & 0o077 and not readable_by_others:
        raise ConfigError(
            f"{what} {path} is readable by other users ({describe_mode(st)}); run "
            f"`chmod 700 {path}` if that is what you want, or choose a path agentd creates "
            f"itself (0700)"
        )


def suggestion(path: str) -> str:
    """A private directory beside `path` that agentd would create for this user."""
    return os.path.join(os.path.dirname(path.rstrip("/")) or "/", f"agentd-{os.geteuid()}")
