"""Where the team's shared material (the reference recordings, security lists) lives.

A checkout has `shared/` beside it (CI clones main next to it); AGENTD_SHARED_DIR
overrides that.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(
    os.environ.get("AGENTD_SHARED_DIR") or Path(__file__).resolve().parents[1].parent / "shared"
)
ORACLE = SHARED / "oracle"
TOOL_SCHEMAS = ORACLE / "tool_schemas.json"
DOCKER_DENIED = SHARED / "security" / "docker_seccomp_denied.json"
