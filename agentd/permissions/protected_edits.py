"""Step 4 of the engine's order: a write to a protected path (`.git/`, `.claude/`, shell
rc files: configuration that makes code run later; the list is
agentd/sandboxing/codebearing.toml), existing or new, at any depth, asks in every mode,
unless an allow rule names that very path. Kept apart so the rule of what counts as
"naming the path" sits next to the check it relaxes."""

from __future__ import annotations

import os

from agentd.permissions.call import Call
from agentd.permissions.matching import RuleMatcher
from agentd.permissions.paths import is_within
from agentd.permissions.rules import EDIT_TOOLS, SourcedRule
from agentd.permissions.settings import MergedSettings
from agentd.sandboxing import homes
from agentd.sandboxing.codebearing import table
from agentd.sandboxing.protected import protected_name
from agentd.sessions.session import Session

_GLOB_CHARS = frozenset("*?[")


def protected_reason(call: Call, session: Session) -> str:
    """Why a file write touches a protected path, or ""; judged below the workspace root
    (a `.git` or `.claude` above the root does not count) and on where links lead."""
    if not call.path or not (call.access_mode == "write" or call.name in EDIT_TOOLS):
        return ""
    for path in dict.fromkeys((call.path, call.real_path)):
        roots = [
            os.path.normpath(r)
            for r in session.workspace_roots
            if is_within(path, os.path.normpath(r))
        ]
        rel = os.path.relpath(path, max(roots, key=len)) if roots else path
        if name := protected_name(rel):
            match = table().by_name(rel)
            why = f": {match.reason}" if match is not None else ""
            return (
                f"{path} is a protected path ({name} holds configuration that makes code "
                f"run later{why}), so a change to it always needs a person's approval"
            )
        if roots and (dot := homes.dot_entry(max(roots, key=len), rel)):
            return (
                f"{path} is a protected path ({dot} is in a home directory: {homes.REASON}), "
                "so a change to it always needs a person's approval"
            )
    return ""


def explicit_allow(
    call: Call, settings: MergedSettings, session: Session, rules: RuleMatcher
) -> SourcedRule | None:
    """An allow rule that names this very path (no wildcard, same file name)."""
    name = os.path.basename(call.path)
    for r in settings.allow:
        spec = r.rule.specifier
        if not spec or _GLOB_CHARS & set(spec) or os.path.basename(spec.rstrip("/")) != name:
            continue
        if rules.matches(r, call, session, kind="allow"):
            return r
    return None
