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
import logging
import os
import stat

from agentd.foundation.errors import ConfigError

log = logging.getLogger(__name__)


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

    An existing directory others may read but not write is used as it is, with a
    warning unless `readable_by_others` (a socket's directory: the socket is 0600).
    `owner` (uid, gid) is who a new directory is given to and who an existing one must
    belong to, when that is not the daemon's user. Raises ConfigError (one line) otherwise.
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
        # Not shared (no one else can write), so usable; but not ours to chmod.
        log.warning(
            "%s %s is readable by other users (%s); run `chmod 700 %s` to keep what "
            "agentd stores there private",
            what,
            path,
            describe_mode(st),
            path,
        )


def suggestion(path: str) -> str:
    """A private directory beside `path` that agentd would create for this user."""
    return os.path.join(os.path.dirname(path.rstrip("/")) or "/", f"agentd-{os.geteuid()}")
