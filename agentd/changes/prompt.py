"""What a person is asked, and what the model is told, about held changes."""

from __future__ import annotations

import os
from typing import Any

from agentd.changes import holding
from agentd.changes.holding import Held

# Held changes listed one by one in a request's input (all are counted, and decided).
PROMPT_ITEMS = 100


def made_by(command: str) -> str:
    """How a held change names the Bash command that made it."""
    shown = command if len(command) <= 160 else command[:157] + "..."
    return f"the Bash command `{shown}`"


def prompt_input(items: list[Held], made_by: str) -> dict[str, Any]:
    first = items[0].path
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    return {
        "file_path": first + more,
        "made_by": made_by,
        "changes": [
            {"path": i.path, "change": i.change, "reason": i.reason, "note": i.note}
            | ({"moved_to": os.path.join(i.root, i.moved_to)} if i.moved_to else {})
            for i in items[:PROMPT_ITEMS]
        ],
        "count": len(items),
        "diff": holding.diff(items),
    }


def prompt_reasons(items: list[Held], made_by: str) -> list[str]:
    lines = [
        f"keep these changes? {made_by} changed files that make code run later, outside "
        "the sandbox, as you; they were reverted, and are applied exactly as shown only "
        "if you say yes:"
    ]
    groups: dict[tuple[str, str, str], list[Held]] = {}
    for item in items:
        key = (os.path.dirname(item.rel), item.change, item.reason)
        groups.setdefault(key if not item.note else (item.rel, "", ""), []).append(item)
    for members in groups.values():
        first = members[0]
        tool = first.reason.split(":", 1)[0]
        if len(members) > 3:
            where = os.path.dirname(first.rel) or "."
            lines.append(f"{where}/: {len(members)} files {first.change}, read by {tool}")
            continue
        for item in members:
            note = f" ({item.note})" if item.note else ""
            lines.append(f"{item.describe()}, read by {tool}{note}")
    return lines


def notice(items: list[Held], made_by: str, verdict: str) -> str:
    """The model's account: each path and its change, then why each kind counts."""
    listed = "\n".join(
        f"  - {i.path} ({'moved to ' + i.moved_to if i.moved_to else i.change})"
        + (f" [{i.note}]" if i.note else "")
        for i in items
    )
    why = "\n".join(f"  {reason}" for reason in dict.fromkeys(i.reason for i in items))
    return (
        f"agentd held {len(items)} change(s) {made_by} made to files that make code run "
        "later outside the sandbox (git configs and hooks, editor and agent settings, "
        f"package-manager and shell configuration). They were reverted at once:\n{listed}\n"
        f"Why they count:\n{why}\n"
        f"{verdict}{_incomplete(verdict)} Do not try to make these changes another way; "
        "if one is needed, ask the user to make or approve it."
    )


def _incomplete(verdict: str) -> str:
    """Said when the changes stay reverted: the command's exit status no longer tells
    whether its work is done."""
    if not verdict.startswith("They stay reverted"):
        return ""
    return (
        " Whatever the command's exit status says, its work is not complete: what it "
        "wrote to these files is not in place."
    )
