"""How a Bash call's sandbox is built, by why the permission engine allowed it.

The engine decides it (agentd/permissions/decision.py Decision.sandbox); the tool and
the launch (agentd/runs/launch.py) build the sandbox from it. It lives here, below
both, so that neither imports the permission engine.
"""

from __future__ import annotations

from enum import StrEnum


class SandboxMode(StrEnum):
    # A rule, a person, a hook or the mode allowed it: the session's sandbox as it is.
    NORMAL = "normal"
    # Only the classifier's read-only verdict let it run: the workspace read-only and no
    # network, so a wrong verdict can read but never write (agentd/sandboxing/readonly.py).
    READ_ONLY = "read_only"
    # A rule allowed a read-only command: the workspace stays writable, the repository's
    # git config is cut to inert keys (the workspace may be hostile).
    NEUTRALISED = "neutralised"
    # A person approved running it outside the sandbox (dangerouslyDisableSandbox).
    UNSANDBOXED = "unsandboxed"
