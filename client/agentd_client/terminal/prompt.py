"""A permission prompt as a person reads it: what is asked, in safe text, and its code.

Every string of a request came from a model or a workspace (the command, the reasons,
the offered rules, a settings file's keys), so each is shown with `sanitize.line`: one
line per field, its control characters and escape sequences visible. The prompt says
when a command holds such characters, since nobody types them.

The code (`display.request_code`) is derived from the request id alone: every terminal shows
the same one for the same request, and `agentctl call` prints it while it waits, so a
prompt that a command's output drew (it cannot know the id) does not match.
"""

from __future__ import annotations

import json
from typing import Any

from agentd_client.terminal import sanitize
from agentd_client.terminal.display import input_of, push_sentence, request_code
from agentd_client.terminal.screen import Row

# Lines of a prompt's diff shown on a terminal (the daemon sends at most 240).
DIFF_LINES = 240


def _what(x: Any) -> tuple[str, str]:
    """(verb, the asked-about input as it was sent)."""
    inp = input_of(x)
    if pushed := push_sentence(inp):
        return "", pushed
    for key, verb in (
        ("command", "to run"),
        ("file_path", "to change"),
        ("url", "to fetch"),
        ("path", "you to trust"),  # TrustSettings: the reasons say what it widens
    ):
        value = inp.get(key)
        if isinstance(value, str) and value:
            return verb, value
    return "", json.dumps(inp, ensure_ascii=False, sort_keys=True)


def choices(x: Any) -> list[str]:
    return list(x.rule_choices) or ([x.suggested_rule] if x.suggested_rule else [])


def question(x: Any) -> str:
    """The answer line's question, ending where the person types."""
    rules = choices(x)
    keys = "y/N" + ("/a" if rules else "") + "".join(f"/{i}" for i in range(1, len(rules)))
    return f"Allow? [y]es once / [N]o / [a]lways [{keys}]: "


def body(x: Any) -> list[str]:
    """The prompt's lines above its question, each one safe line."""
    verb, what = _what(x)
    tool = sanitize.line(x.tool_name)
    lines = [f"{tool} wants{' ' + verb if verb else ''}: {sanitize.line(what)}"]
    if hidden := sanitize.hidden_count(what):
        lines.append(
            f"  ! it holds {hidden} control or invisible character{'s' if hidden > 1 else ''}, "
            "shown escaped (\\x1b, \\n, \\u202e…): nobody types those"
        )
    if x.reasons:
        first, *rest = x.reasons
        lines.append(f"  because: {sanitize.line(first)}")
        lines += [f"           {sanitize.line(r)}" for r in rest]
    if isinstance(diff := input_of(x).get("diff"), str) and diff:
        # Held changes (KeepChanges): what a yes would put in place.
        lines += [f"  | {sanitize.line(line)}" for line in diff.splitlines()[:DIFF_LINES]]
    rules = choices(x)
    if rules:
        lines.append(f"  [a]lways adds the rule {sanitize.line(rules[0])}")
        for i, rule in enumerate(rules[1:], 1):
            lines.append(f"  [{i}] always, narrower: {sanitize.line(rule)}")
    return lines


def rows(x: Any, more: int, typed: str) -> list[Row]:
    """The prompt as the bottom of a screen draws it: a header with its code (in a style
    no output can draw), the body under a gutter, the question with what was typed."""
    head = f" agentctl: permission request, code {request_code(x.request_id)} "
    if more:
        head += f"({more} more waiting) "
    out = [Row(head, "head")]
    out += [Row(line, gutter="│ ", gutter_style="head") for line in body(x)]
    out.append(Row(question(x) + typed, "bold", gutter="╰ ", gutter_style="head"))
    return out


def parse_answer(line: str, rules: list[str]) -> tuple[str, str, str] | None:
    """(decision, scope, rule) for an answer; None when it is not one."""
    answer = line.strip().lower()
    if answer in ("", "n", "no"):
        return "deny", "once", ""
    if answer in ("y", "yes"):
        return "allow", "once", ""
    if answer in ("a", "always") and rules and rules[0]:
        return "allow", "always", rules[0]
    if answer.isdigit() and 1 <= int(answer) < len(rules):
        return "allow", "always", rules[int(answer)]
    return None


def not_an_answer(x: Any) -> str:
    n = len(choices(x)) - 1
    more = f", or 1-{n} for a narrower rule" if n > 0 else ""
    return f"answer y, n (the default) or a{more}"
