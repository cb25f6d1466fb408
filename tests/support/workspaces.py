"""Workspaces a root daemon's sandbox identity can use.

pytest's own tmp_path sits in a 0700 directory of root's, which the unprivileged uid a
root daemon runs commands and file tools as cannot enter: CreateSession refuses such a
workspace (agentd/fs/workspace_access.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SANDBOX_UID = 65534


def reachable_workspace(prefix: str = "agentd-ws-") -> Path:
    """A new directory under /tmp, 0755, owned by the sandbox user when we are root.
    The caller removes it."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(root, SANDBOX_UID, SANDBOX_UID)
    return root
