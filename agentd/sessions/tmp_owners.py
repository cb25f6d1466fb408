"""Which daemon made each session's directories under /tmp, so that what a daemon
that is gone for good left there is removed by the next daemon to start.

A session's directory (<base>/<id>, holding its temp dir and its output files; the base
is a directory of the daemon's own that mkdtemp made in /tmp, agentd/sessions/dirs.py)
outlives a daemon whose state dir was deleted (a test's, a reinstall). So each
session's directories are recorded at creation in a directory of the daemon user's
own (the tmp_owners_dir setting, beside the default state dir, 0700: no sandbox
can write there), with the state dir of the daemon that owns them. The default is
shared by every daemon of the user; a daemon given a directory of its own
(each test's) neither sweeps the others' records nor has its own swept by them. At
start a daemon removes the directories of records of another state dir that is gone
(the whole directory deleted), when the record is older than GRACE_SECONDS (a state
disk that is only unmounted for a while is not taken for gone).

A record of its own state dir whose session its store does not know, written before
this daemon started (the sweep runs while the daemon serves: a record written since is
of a session it just made), is left with its directories and reported: the store may
have lost history (a damaged journal accepted short, an older backup restored), and a
session it cannot prove closed keeps what it had. Those of sessions it knows are the
store's to remove (agentd/sessions/retention.py reaps them).

Directories made before records were kept are not known to anyone and stay.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

from agentd.foundation.errors import ConfigError
from agentd.foundation.privdir import ensure_private_dir
from agentd.fs import tmpfs
from agentd.sessions import dirs as session_dirs

log = logging.getLogger(__name__)

# A file's times come from the kernel's coarse clock, a tick or so behind time.time():
# a record written just after the daemon's start may look older than it. Within this
# many seconds of the start, a record counts as made since (kept: the safe side).
_CLOCK_SLACK = 1.0

GRACE_SECONDS = 3600.0
_SESSION_ID = re.compile(r"[0-9a-f]{32}")
# The only paths a record may name: a session's directory in a base, or its temp dir;
# or, in a record an older daemon wrote, /tmp/agentd-<uid>/<id> or /tmp/agentd-out-<uid>/<id>.
_SESSION_DIR = re.compile(r"/tmp/agentd-(?:[A-Za-z0-9_]{8}|(?:out-)?[0-9]+)/([0-9a-f]{32})(/tmp)?")
# A base of agentd/sessions/dirs.py, which goes with its last session's directory.
_BASE = re.compile(r"/tmp/agentd-[A-Za-z0-9_]{8}")


def record(directory: str, session_id: str, state_dir: str, paths: list[str]) -> None:
    """Say in `directory` (the owners dir) that `paths` (the session's directories)
    belong to the daemon of `state_dir`. Never fails the caller: without a record, only
    the session's own daemon removes them (when it reaps the session)."""
    try:
        ensure_private_dir(directory, "session owners dir")
        tmp = os.path.join(directory, f".{session_id}.new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"state_dir": state_dir, "paths": paths}, f)
        os.replace(tmp, os.path.join(directory, session_id))
    except (OSError, ConfigError) as exc:
        log.warning("cannot record the owner of session %s's directories: %s", session_id, exc)


def forget(directory: str, session_id: str) -> None:
    try:
        os.unlink(os.path.join(directory, session_id))
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove the owner record of session %s: %s", session_id, exc)


def sweep(
    directory: str,
    state_dir: str,
    known: Callable[[str], bool],
    started: float,
    now: float | None = None,
    remove_unknown: bool = False,
) -> tuple[int, list[str]]:
    """Remove the directories of sessions whose daemon is gone for good, as the records
    in `directory` say (see the module's docstring). (the number of sessions cleaned,
    the ids of our own state dir's sessions the store does not know, left as they are;
    with `remove_unknown` those are removed too: a test run's end, whose daemons are
    all gone)."""
    try:
        ensure_private_dir(directory, "session owners dir")
        names = os.listdir(directory)
    except (OSError, ConfigError) as exc:
        log.warning("cannot look for directories left by other daemons: %s", exc)
        return 0, []
    now = time.time() if now is None else now
    cleaned, unknown = 0, []
    for name in sorted(names):
        if not _SESSION_ID.fullmatch(name):
            continue
        entry = _read(os.path.join(directory, name))
        if entry is None:
            continue
        body, mtime = entry
        owner = body.get("state_dir")
        if not isinstance(owner, str) or not owner:
            continue
        if owner == state_dir:
            if known(name) or mtime >= started - _CLOCK_SLACK:
                continue
            if not remove_unknown:
                unknown.append(name)
                continue
        elif os.path.exists(owner) or now - mtime < GRACE_SECONDS:
            continue
        bases = set()
        for path in body.get("paths", []):
            match = _SESSION_DIR.fullmatch(path) if isinstance(path, str) else None
            if match and match.group(1) == name:
                tmpfs.remove(path)  # the temp dir first: it may be a mount
                if _BASE.fullmatch(base := path[: match.start(1) - 1]):
                    bases.add(base)
        for base in bases if owner != state_dir else ():
            session_dirs.remove_if_empty(base)  # a gone daemon's: nothing will use it
        forget(directory, name)
        cleaned += 1
    return cleaned, unknown


def _read(path: str) -> tuple[dict[str, Any], float] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        mtime = os.fstat(f.fileno()).st_mtime
        try:
            body = json.load(f)
        except ValueError:
            return None
    return (body, mtime) if isinstance(body, dict) else None
