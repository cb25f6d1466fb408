"""Config files the client writes for people (its contexts, Claude Code's and Codex's
settings): whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, dir_mode: int = 0o700, keep_mode: bool = True) -> None:
    """`data` to a temp file beside `path`, synced, then renamed over it: a crash never
    leaves half a file. `keep_mode`: an existing file keeps its permissions (else the
    temp file's 0600)."""
    path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    import tempfile  # only a command that writes a file

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if keep_mode and path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
