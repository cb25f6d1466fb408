"""agentctl's version: the installed distribution's, read without importing anything else.

Read from the distribution's `*.dist-info/METADATA` on sys.path, as importlib.metadata
finds it, without importlib.metadata itself (it loads the email package: most of what
`agentctl --version` would cost); importlib.metadata is the fallback for other layouts
(an egg, a zip)."""

from __future__ import annotations

import os
import sys

_DISTS = ("agentd_client", "agentd")


def _from_dist_info(dist: str) -> str | None:
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(f"{dist}-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as f:
                        for line in f:
                            if line.startswith("Version:"):
                                return line.partition(":")[2].strip()
                            if not line.strip():  # the headers end here
                                break
                except OSError:
                    continue
    return None


def version() -> str:
    for dist in _DISTS:
        if found := _from_dist_info(dist):
            return found
    from importlib import metadata

    for dist in _DISTS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"
