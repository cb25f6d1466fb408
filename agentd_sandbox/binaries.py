"""The system tools a sandbox start execs (bwrap, setpriv, prlimit), found once.

Every Bash call, search and hook starts a sandbox; a PATH walk per tool per start cost
~0.1 ms each. A tool found is remembered (its path is fixed system dirs); one not found
is looked for again next time, so installing it takes effect without a restart.
"""

from __future__ import annotations

import shutil

SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
_found: dict[tuple[str, str], str] = {}


def find(name: str, path: str = SYSTEM_PATH) -> str | None:
    """`name` on `path` (fixed system directories, never the caller's PATH)."""
    key = (name, path)
    hit = _found.get(key)
    if hit is None:
        hit = shutil.which(name, path=path)
        if hit is not None:
            _found[key] = hit
    return hit
