"""One tool call as the permission checks see it, and what a check can conclude."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentd.fs import access as fsaccess
from agentd.permissions.rules import SourcedRule
from agentd.sandboxing.mode import SandboxMode
from agentd.sessions.session import Session
from agentd.tools.base import Tool

# Tools that touch nothing but the session's own state (its todo list, its own tasks'
# output): Claude Code never asks for them, and plan mode lets them run.
PERMISSIONLESS_TOOLS = frozenset({"TodoWrite", "BashOutput", "TaskStop", "KillShell", "KillBash"})


@dataclass
class Call:
    """One call, described once for every check."""

    tool: Tool
    args: dict[str, Any]
    # Bash
    command: str = ""
    classification: Any = None
    # File tools: the absolute path as the session means it, and where it really leads.
    access_mode: str = ""
    path: str = ""
    real_path: str = ""
    # WebFetch
    url: str = ""

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def is_bash(self) -> bool:
        return self.classification is not None

    def read_only(self) -> bool:
        if self.name in PERMISSIONLESS_TOOLS:
            return True
        if self.is_bash:
            return bool(self.classification.read_only)
        try:
            return bool(self.tool.is_read_only(self.args))
        except Exception:
            return False

    def describe(self) -> str:
        if self.is_bash:
            return f"the command `{self.command}`"
        if self.path:
            return f"{self.name} on {self.path}"
        if self.url:
            return f"{self.name} of {self.url}"
        return f"the {self.name} tool"


def describe_call(
    session: Session, tool: Tool, args: dict[str, Any], classify: Callable[[str], Any]
) -> Call:
    """The call as every check sees it: a Bash command classified once, a file tool's
    path expanded as the tool will expand it, a WebFetch's URL."""
    call = Call(tool, args)
    if tool.name == "Bash":
        call.command = str(args.get("command", ""))
        call.classification = classify(call.command)
        return call
    if tool.name == "WebFetch":
        call.url = str(args.get("url", ""))
    try:
        access = tool.file_access(args)
    except Exception:
        access = None
    if access is not None and access.path and "\0" not in access.path:
        call.access_mode = access.mode
        # The very expansion the tool makes (~, the cwd, the whitespace a model
        # leaves around a path): the rules judge the file the tool will touch.
        call.path = fsaccess.expand(access.path, session.cwd, session.home)
        call.real_path = os.path.realpath(call.path)
    return call


@dataclass
class Allow:
    decided_by: str
    reason: str
    grants: list[str] = field(default_factory=list)
    # Decision.sandbox: READ_ONLY when only the classifier's verdict allows the call.
    sandbox: SandboxMode = SandboxMode.NORMAL


@dataclass
class Ask:
    decided_by: str
    reasons: list[str]
    # The rules an "always" answer may add, broadest first, each one allowing this call
    # (offered.py); none when no allow rule could end this ask.
    rule_choices: tuple[str, ...] = ()
    # Paths to grant the call if a person allows it.
    grants: list[str] = field(default_factory=list)
    # Decision.sandbox if a person allows it.
    sandbox: SandboxMode = SandboxMode.NORMAL

    @property
    def suggested_rule(self) -> str:
        """The rule "always" adds unless a narrower one is chosen; "" when none is offered."""
        return self.rule_choices[0] if self.rule_choices else ""


def rule_note(rule: SourcedRule) -> str:
    return f"`{rule.rule.text}` ({rule.source})"
