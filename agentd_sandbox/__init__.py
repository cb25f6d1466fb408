"""agentd_sandbox: bubblewrap + seccomp + limits, usable alone (imports nothing of agentd)."""

from .bwrap import hides
from .check import check
from .errors import PathGone, SandboxError, SandboxUnavailable
from .policy import Limits, SandboxPolicy
from .runner import SandboxProcess, run, shell_argv, spawn

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
