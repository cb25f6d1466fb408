"""agentd_sandbox: bubblewrap + seccomp + limits, usable alone (imports nothing of agentd).

The names that need the sandbox's machinery (bwrap, the runner and its asyncio, the
probe) are loaded on first use: the shim's forkserver and the host watch import only
`agentd_sandbox.linux`, and start without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import PathGone, SandboxError, SandboxUnavailable
from .policy import Limits, SandboxPolicy

if TYPE_CHECKING:
    from .bwrap import hides
    from .probe import check
    from .runner import SandboxProcess, run, shell_argv, spawn

# name -> the submodule that holds it
_LAZY = {
    "hides": "bwrap",
    "check": "probe",
    "SandboxProcess": "runner",
    "run": "runner",
    "shell_argv": "runner",
    "spawn": "runner",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "PathGone",
    "Limits",
    "SandboxError",
    "SandboxPolicy",
    "SandboxProcess",
    "SandboxUnavailable",
    "check",
    "hides",
    "run",
    "shell_argv",
    "spawn",
]
