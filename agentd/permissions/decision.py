"""What the permission engine answers about a call, as typed values.

Behavior is what a check concludes (a rule, a hook, a mode, a person); an ask is carried
out (a person answers, or it becomes a deny) before the executor sees the Decision,
which only allows or denies. How an allowed Bash command's sandbox is built is its
SandboxMode (agentd/sandboxing/mode.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentd.sandboxing.mode import SandboxMode


class Behavior(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True, slots=True)
class Decision:
    """A permission decision: who or what decided, and why."""

    behavior: Behavior  # ALLOW or DENY: an ask is answered before a Decision is made
    reason: str = ""
    decided_by: str = ""
    # Input to run instead (a hook may rewrite it).
    updated_input: dict[str, Any] | None = None
    sandbox: SandboxMode = SandboxMode.NORMAL

    def __post_init__(self) -> None:
        # Typed even when built from the strings of the wire or a hook's answer.
        behavior, sandbox = Behavior(self.behavior), SandboxMode(self.sandbox)
        if behavior is Behavior.ASK:
            raise ValueError("a Decision allows or denies; an ask is answered before it")
        object.__setattr__(self, "behavior", behavior)
        object.__setattr__(self, "sandbox", sandbox)

    @property
    def allowed(self) -> bool:
        return self.behavior is Behavior.ALLOW
