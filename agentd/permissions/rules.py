"""Permission rules in Claude Code's syntax: parsing, and matching one call against one rule.

    Tool                      every call of the tool
    Bash(npm run test:*)      a command that is, or starts with the words, `npm run test`
    Bash(ls *)                `*` matches anything; ` *` at the end also matches bare `ls`
    Bash(npm run build)       exactly that command
    Read(//etc/**)            a gitignore-style path pattern (see paths.py)
    Edit(/src/**/*.ts)
    WebFetch(domain:example.com)

A rule for Edit covers every file-writing tool (Edit, MultiEdit, Write, NotebookEdit),
and a rule for Read every file-reading tool (Read, Glob, Grep, LS), as in Claude Code,
so one rule protects a file whichever tool the model picks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from agentd.foundation.errors import InvalidRequest
from agentd.network.rules import presets
from agentd.permissions import paths

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS"})
PATH_TOOLS = EDIT_TOOLS | READ_TOOLS

_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule. `text` is the rule as written, for messages and the journal."""

    text: str
    tool: str
    specifier: str | None = None

    def covers_tool(self, tool_name: str) -> bool:
        if self.tool == tool_name:
            return True
        if self.tool == "Edit":
            return tool_name in EDIT_TOOLS
        if self.tool == "Read":
            return tool_name in READ_TOOLS
        return False


@dataclass(frozen=True, slots=True)
class SourcedRule:
    """A rule and where it came from: the source names it in messages; `base` anchors `/path`
    patterns (empty: each workspace root)."""

    rule: Rule
    source: str
    base: str = ""


def parse_rule(text: str) -> Rule:
    """Parse one rule; raises InvalidRequest saying what is wrong and what a rule looks like."""
    return _parse(text.strip() if isinstance(text, str) else text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> Rule:
    if not isinstance(text, str) or not text:
        raise InvalidRequest("a permission rule must not be empty; e.g. 'Bash(npm test:*)'")
    if "(" not in text:
        if not _TOOL_NAME.fullmatch(text):
            raise InvalidRequest(
                f"invalid permission rule {text!r}: expected a tool name such as 'Bash' "
                "or 'Tool(specifier)' such as 'Bash(npm test:*)'"
            )
        return Rule(text, text)
    tool, _, rest = text.partition("(")
    if not _TOOL_NAME.fullmatch(tool):
        raise InvalidRequest(
            f"invalid permission rule {text!r}: {tool!r} is not a tool name; "
            "write 'Tool(specifier)', e.g. 'Edit(/src/**)'"
        )
    if not rest.endswith(")"):
        raise InvalidRequest(f"invalid permission rule {text!r}: missing the closing ')'")
    spec = rest[:-1].strip()
    if spec in ("", "*"):
        # Bash() and Bash(*) mean every Bash call, as Claude Code reads them.
        return Rule(text, tool)
    if tool == "Bash":
        if ":*" in spec and not (spec.endswith(":*") and spec.count(":*") == 1):
            raise InvalidRequest(
                f"invalid permission rule {text!r}: ':*' may only end a prefix rule, "
                "e.g. 'Bash(npm run test:*)'"
            )
        if spec == ":*":
            raise InvalidRequest(f"invalid permission rule {text!r}: empty command prefix")
    elif tool == "WebFetch" and spec.startswith("preset:"):
        name = spec[len("preset:") :].strip()
        known = presets()
        if name not in known:
            raise InvalidRequest(
                f"invalid permission rule {text!r}: no network preset {name!r}; there are "
                + ", ".join(sorted(known))
            )
    elif tool == "WebFetch":
        if not spec.startswith("domain:") or not spec[len("domain:") :].strip():
            raise InvalidRequest(
                f"invalid permission rule {text!r}: WebFetch rules name a host, "
                "e.g. 'WebFetch(domain:example.com)' or 'WebFetch(preset:pypi)'"
            )
    elif tool in PATH_TOOLS and "\0" in spec:
        raise InvalidRequest(f"invalid permission rule {text!r}: NUL in path")
    return Rule(text, tool, spec)


# --- Bash ---------------------------------------------------------------------------------


def _squash(command: str) -> str:
    return " ".join(command.split())


@lru_cache(maxsize=4096)
def _wildcard(spec: str) -> re.Pattern[str]:
    body = _squash(spec)
    tail = ""
    if body.endswith(" *"):
        # `ls *` matches `ls` alone and `ls` followed by anything, never `lsof`.
        body, tail = body[:-2], "(?: .*)?"
    parts = [re.escape(p) for p in body.split("*")]
    return re.compile(".*".join(parts) + tail, re.DOTALL)


def bash_spec_matches(spec: str, command: str, prefix: str = "") -> bool:
    """Whether one simple command (its text, and the classifier's prefix) matches `spec`."""
    command = _squash(command)
    if spec.endswith(":*"):
        want = _squash(spec[:-2])
        candidates = [command, _squash(prefix)] if prefix else [command]
        return any(c == want or c.startswith(want + " ") for c in candidates)
    if "*" in spec:
        return _wildcard(spec).fullmatch(command) is not None
    return command == _squash(spec)


# --- WebFetch -----------------------------------------------------------------------------


def url_host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def domain_matches(spec: str, url: str) -> bool:
    """`domain:HOST` (or `*.DOMAIN`), or `preset:NAME`: any of the preset's hosts."""
    if spec.startswith("preset:"):
        preset = presets().get(spec[len("preset:") :].strip())
        hosts = preset[1] if preset else ()
        return any(domain_matches(f"domain:{h}", url) for h in hosts if ":" not in h)
    want = spec[len("domain:") :].strip().lower()
    host = url_host(url)
    if not host:
        return False
    if want.startswith("*."):
        return host.endswith(want[1:])
    return host == want


# --- paths --------------------------------------------------------------------------------


def path_matches(spec: str, path: str, *, bases: list[str], cwd: str, home: str) -> bool:
    """Whether absolute `path` matches the path specifier anchored at any of `bases`."""
    return any(
        paths.matches(paths.anchor_pattern(spec, base=base, cwd=cwd, home=home), path)
        for base in bases
    )
