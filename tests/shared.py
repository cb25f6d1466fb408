"""The reference material the tests use, carried in `tests/data/` so a clone stands alone.

`tests/data/oracle/` holds the recorded results of the reference tools (Claude Code
2.1.328) and its tool schemas; `tests/data/security/` the Docker seccomp deny list.
They are copies of the team's `shared/` folder: refresh them from there when it changes.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ORACLE = DATA / "oracle"
TOOL_SCHEMAS = ORACLE / "tool_schemas.json"
DOCKER_DENIED = DATA / "security" / "docker_seccomp_denied.json"
