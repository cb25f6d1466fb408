"""Where this agentd-client was installed from, so a hint to add an extra works there.

agentd-client is not on any package index: it is installed from a checkout's `client/`
(`make`, `make install`, `pip install ./client`) or from the wheel `make dist` builds.
pip records such a direct install in the distribution's `direct_url.json` (PEP 610),
so the hint names that same checkout or wheel, and the interpreter agentctl runs on
(the pip on PATH may belong to another environment: `make install`'s venv is
/usr/local/lib/agentd).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from importlib import metadata
from urllib.parse import unquote, urlparse

DIST = "agentd-client"


def source() -> tuple[str, bool] | None:
    """(the local path agentd-client was installed from, editable), or None when pip
    recorded no local path (installed by name, from an index or a --find-links dir)."""
    try:
        text = metadata.distribution(DIST).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    editable = bool((record.get("dir_info") or {}).get("editable"))
    return unquote(url.path), editable


def install_command(extra: str) -> str:
    """The command that adds `extra` to this installation of agentd-client."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    found = source()
    if found is None:
        return (
            f"{pip} 'PATH[{extra}]' with PATH the agentd checkout's client/ or the wheel "
            "`make dist` builds (agentd-client is on no package index)"
        )
    path, editable = found
    target = shlex.quote(f"{path}[{extra}]")
    if editable:
        return f"{pip} -e {target}"
    if path.endswith(".whl"):
        # `make dist` leaves the extras' wheels beside it, for a machine with no index.
        return f"{pip} --find-links {shlex.quote(os.path.dirname(path))} {target}"
    return f"{pip} {target}"
