"""Sessions by name or by unique id prefix, and durations for `session gc --idle`.

The daemon resolves a name or an id prefix in every request (agentd/api/names.py), so a
command asks it once (GetSession) for the id it then uses, and an ambiguous reference is
refused there, naming its candidates.
"""

from __future__ import annotations

import argparse
import re

from agentd_client.core.client import Client
from agentd_client.core.errors import Usage

_FULL_ID = re.compile(r"^[0-9a-f]{32}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def of_args(client: Client, args: argparse.Namespace) -> str:
    """The session a command names (or the default one), resolved to its id."""
    return resolve(client, args.session or args.default_session)


def resolve(client: Client, ref: str) -> str:
    """The id of the session `ref` names: a full id, a name, or a unique id prefix."""
    if not ref:
        raise Usage("no session given: pass --session NAME|ID, or set AGENTD_SESSION")
    if _FULL_ID.match(ref):
        return ref
    return client.get_session(ref).id


def parse_duration(text: str) -> float:
    """Seconds in `7d`, `12h`, `30m`, `90s`, `2w` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise Usage(f"duration {text!r}: use a number with s, m, h, d or w (e.g. 7d)")
    return float(match.group(1)) * _UNIT[match.group(2)]
