"""Permissions: rules, modes, hooks, and asking people.

decision.py  Decision and Behavior: what the engine answers, typed
engine.py    PermissionEngine: the executor's PermissionChecker (decide, after_call)
call.py      one call as the checks see it (describe_call), and Allow / Ask
tool_check.py      the tool's own check, when no rule or hook decided
protected_paths.py protected-path writes, and the allow rule that names one
rules.py     parse_rule and matching in Claude Code's rule syntax
paths.py     gitignore-style path patterns for Read/Edit rules
settings.py  the sources merged: daemon config, .claude/settings*.json, session rules
trust.py     which settings content may widen permissions; reading settings files safely
approvals.py the "trust these settings?" prompt, reports, and agentctl trust's requests
hooks.py     PreToolUse / PostToolUse command hooks (Claude Code's protocol)
asker.py     Asker: PermissionRequested out, the first ResolvePermission in
"""

from agentd.permissions.asker import Answer, Asker
from agentd.permissions.call import PERMISSIONLESS_TOOLS
from agentd.permissions.engine import PermissionEngine
from agentd.permissions.rules import Rule, SourcedRule, parse_rule
from agentd.permissions.settings import SettingsLoader
from agentd.permissions.trust import TrustStore

__all__ = [
    "PERMISSIONLESS_TOOLS",
    "Answer",
    "Asker",
    "PermissionEngine",
    "Rule",
    "SettingsLoader",
    "SourcedRule",
    "TrustStore",
    "parse_rule",
]
