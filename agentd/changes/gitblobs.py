"""Pre-images from git: the content git's index holds for files a call changed that no
earlier checkpoint saw (nothing copied until it is needed).

git runs as a subprocess, as the session's sandbox identity, on the workspace's own
repository, only reading: no hooks run for ls-files or cat-file, no system or global
config, no fsmonitor, no optional locks (the index is not rewritten), pathspecs
literal, and the search for the repository stops at the workspace root.
"""

from __future__ import annotations

import os
import subprocess

from agentd.fs.identity import FsIdentity

_TIMEOUT = 30.0


def _env(root: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(root.rstrip("/")) or "/",
        "LC_ALL": "C",
    }


def _git(root: str, identity: FsIdentity | None, args: list[str], data: bytes = b"") -> bytes:
    done = subprocess.run(  # noqa: S603 - a fixed argv, no shell
        ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", *args],
        cwd=root,
        env=_env(root),
        input=data,
        capture_output=True,
        timeout=_TIMEOUT,
        check=False,
        user=identity.uid if identity is not None else None,
        group=identity.gid if identity is not None else None,
        extra_groups=list(identity.groups) if identity is not None else None,
    )
    if done.returncode != 0:
        raise OSError(done.stderr.decode(errors="replace").strip()[:200] or "git failed")
    return done.stdout


def blobs(root: str, identity: FsIdentity | None, rels: list[str]) -> dict[str, tuple[int, bytes]]:
    """For each of `rels` git's index holds: (its git mode, its content). Nothing when
    the root is not in a repository or git cannot read it."""
    if not rels or not os.path.exists(os.path.join(root, ".git")):
        return {}
    try:
        listed = _git(root, identity, ["ls-files", "-s", "-z", "--", *rels])
    except (OSError, subprocess.SubprocessError):
        return {}
    wanted: dict[str, tuple[int, str]] = {}
    for record in listed.split(b"\0"):
        if not record:
            continue
        head, _, name = record.partition(b"\t")
        fields = head.split()
        if len(fields) != 3 or fields[2] != b"0":  # stage 0 only (no conflict)
            continue
        wanted[name.decode(errors="surrogateescape")] = (int(fields[0], 8), fields[1].decode())
    if not wanted:
        return {}
    shas = "".join(f"{sha}\n" for _, sha in wanted.values()).encode()
    try:
        out = _git(root, identity, ["cat-file", "--batch"], shas)
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[str, bytes] = {}
    pos = 0
    for _, sha in wanted.values():
        end = out.find(b"\n", pos)
        if end < 0:
            break
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        found[sha] = out[pos : pos + size]
        pos += size + 1
    return {rel: (mode, found[sha]) for rel, (mode, sha) in wanted.items() if sha in found}


def tracked_clean(root: str, identity: FsIdentity | None) -> set[str] | None:
    """The paths git tracks whose working file matches the index (by git's own stat
    check, then content where the stat cannot tell); None when the root is not a
    repository git can read."""
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        listed = _git(root, identity, ["ls-files", "-z"])
        dirty = _git(root, identity, ["diff-files", "--name-only", "-z"])
    except (OSError, subprocess.SubprocessError):
        return None
    names = {n.decode(errors="surrogateescape") for n in listed.split(b"\0") if n}
    return names - {n.decode(errors="surrogateescape") for n in dirty.split(b"\0") if n}
