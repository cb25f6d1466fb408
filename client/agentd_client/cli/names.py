"""Sessions by name or by unique id prefix, resolved client-side from ListSessions.

Resolved in the client so any daemon that lists sessions serves it, and so an
ambiguous reference can list its candidates. Order: a full id; a name (the open
session of that name: the daemon refuses a second open one; else the closed ones,
which may share it); a unique id prefix. Durations for `session gc --idle` too.
"""

from __future__ import annotations

import argparse
import re
import time

from agentd_client.core.client import Client, Session
from agentd_client.core.errors import Refused, Usage

_FULL_ID = re.compile(r"^[0-9a-f]{32}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def describe(s: Session) -> str:
    state = "closed" if s.closed else "open"
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_ms / 1000))
    return f"{s.id}  {s.name or '-'}  {state}  created {created}"


def _one(ref: str, matches: list[Session], how: str) -> Session:
    if len(matches) == 1:
        return matches[0]
    listed = "\n  ".join(describe(s) for s in matches)
    raise Refused(
        f"session {ref!r} is ambiguous: {len(matches)} sessions match by {how}; "
        f"use more of the id:\n  {listed}"
    )


def of_args(client: Client, args: argparse.Namespace) -> str:
    """The session a command names (or the default one), resolved to its id."""
    return resolve(client, args.session or args.default_session)


def resolve(client: Client, ref: str) -> str:
    """The id of the session `ref` names: a full id, a name, or a unique id prefix."""
    if not ref:
        raise Usage("no session given: pass --session NAME|ID, or set AGENTD_SESSION")
    if _FULL_ID.match(ref):
        return ref
    sessions = client.list_sessions(include_closed=True)
    named = [s for s in sessions if s.name == ref]
    if named:
        open_named = [s for s in named if not s.closed]
        return _one(ref, open_named or named, "name").id
    prefixed = [s for s in sessions if s.id.startswith(ref.lower())]
    if prefixed:
        return _one(ref, prefixed, "id prefix").id
    raise Refused(f"no session named {ref!r} or with an id starting so; see `agentctl session ls`")


def parse_duration(text: str) -> float:
    """Seconds in `7d`, `12h`, `30m`, `90s`, `2w` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise Usage(f"duration {text!r}: use a number with s, m, h, d or w (e.g. 7d)")
    return float(match.group(1)) * _UNIT[match.group(2)]
