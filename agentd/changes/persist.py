"""Each root's baseline kept in the daemon's state, so that what the tracker knows survives
the daemon: a task that changes a code-bearing file and ends while no daemon runs (after
a kill -9, or a stop that leaves tasks running) is found by the next daemon, which
compares its first walk with what was known good here and holds every difference.

One JSON file per (root, identity) in the daemon's private state dir, written whole
(a temporary file renamed over) when the known-good set changed. Contents up to
KEEP_BYTES per file are kept, so a held file can be put back as it was.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets

from agentd.changes.files import Entry
from agentd.changes.walk import Baseline

KEEP_BYTES = 256 * 1024
_VERSION = 1


def path_for(state_dir: str, root: str, identity: str) -> str:
    """Where the baseline of `root` as seen by `identity` (its uid, gid and groups) is kept."""
    name = hashlib.sha256(f"{root}\0{identity}".encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(state_dir, f"{name[:32]}.json")


def signature(baseline: Baseline) -> str:
    """What a saved copy must match: every entry's kind, mode and digest."""
    h = hashlib.sha256()
    for rel in sorted(baseline.entries):
        e = baseline.entries[rel]
        h.update(f"{rel}\0{e.kind}\0{e.mode & 0o7777}\0{e.digest}\n".encode(errors="replace"))
    return h.hexdigest()


def save(path: str, baseline: Baseline) -> None:
    entries = {}
    for rel, e in baseline.entries.items():
        content = e.content if e.content is not None and len(e.content) <= KEEP_BYTES else None
        entries[rel] = {
            "kind": e.kind,
            "mode": e.mode,
            "digest": e.digest,
            "size": e.size,
            "content": base64.b64encode(content).decode() if content is not None else None,
            "reason": baseline.reasons.get(rel, ""),
        }
    data = {"version": _VERSION, "root": baseline.root, "entries": entries}
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(path: str, root: str) -> Baseline | None:
    """The saved baseline of `root`, or None (none saved, or unreadable: then the next
    walk is the first, as for a new root)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != _VERSION or data.get("root") != root:
        return None
    out = Baseline(root)
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return None
    for rel, raw in entries.items():
        try:
            content = base64.b64decode(raw["content"]) if raw.get("content") is not None else None
            entry = Entry(
                str(raw["kind"]), int(raw["mode"]), content, str(raw["digest"]), int(raw["size"])
            )
        except (KeyError, TypeError, ValueError):
            continue
        out.entries[str(rel)] = entry
        out.reasons[str(rel)] = str(raw.get("reason", ""))
    return out
