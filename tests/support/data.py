"""The reference material the tests use, carried in `tests/data/` so a clone stands alone.

`tests/data/oracle/` holds the recorded results of the reference tools (Claude Code
2.1.328) and its tool schemas; `tests/data/security/` the Docker seccomp deny list.
They are copies of the team's `shared/` folder: refresh them from there when it changes.
The reference CLI itself is not in the repo: `make test` installs it (claude_code_bin).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent  # the checkout
DATA = TESTS / "data"
ORACLE = DATA / "oracle"
TOOL_SCHEMAS = ORACLE / "tool_schemas.json"
FAKE_API = ORACLE / "fake_api.py"  # the fake Messages API the oracle harness uses
DOCKER_DENIED = DATA / "security" / "docker_seccomp_denied.json"

# Where `make test` installs the reference CLI (outside the repo; see the Makefile).
CLAUDE_CODE_DIR = Path.home() / ".cache" / "agentd" / "claude-code"


def claude_code_bin() -> str | None:
    """The Claude Code CLI: CLAUDE_BIN, the one `make test` installed, or `claude` on PATH."""
    for candidate in (
        os.environ.get("CLAUDE_BIN"),
        str(CLAUDE_CODE_DIR / "node_modules" / ".bin" / "claude"),
        shutil.which("claude"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None
