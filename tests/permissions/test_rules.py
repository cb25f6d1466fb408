"""agentd/permissions/rules.py and paths.py: parsing rules and matching one thing."""

from __future__ import annotations

import pytest

from agentd.foundation.errors import InvalidRequest
from agentd.permissions import parse_rule
from agentd.permissions.paths import anchor_pattern, matches
from agentd.permissions.rules import bash_spec_matches, domain_matches


@pytest.mark.parametrize(
    ("text", "tool", "spec"),
    [
        ("Bash", "Bash", None),
        ("Bash(*)", "Bash", None),
        ("Bash(npm run test:*)", "Bash", "npm run test:*"),
        ("Bash(ls *)", "Bash", "ls *"),
        ("Edit(/src/**/*.ts)", "Edit", "/src/**/*.ts"),
        ("Read(//etc/passwd)", "Read", "//etc/passwd"),
        ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com"),
        ("mcp__github__create_issue", "mcp__github__create_issue", None),
        ("  Bash(git status)  ", "Bash", "git status"),
    ],
)
def test_parse_valid(text: str, tool: str, spec: str | None) -> None:
    rule = parse_rule(text)
    assert (rule.tool, rule.specifier) == (tool, spec)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "must not be empty"),
        ("Bash(ls", "closing ')'"),
        ("ba sh", "tool name"),
        ("(ls)", "not a tool name"),
        ("Bash(npm:*run)", "':*' may only end"),
        ("WebFetch(example.com)", "domain:"),
    ],
)
def test_parse_invalid_says_why(text: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_rule(text)
    assert says in str(raised.value)


def test_edit_and_read_rules_cover_their_tool_families() -> None:
    edit, read = parse_rule("Edit"), parse_rule("Read(//x)")
    assert all(edit.covers_tool(t) for t in ("Edit", "MultiEdit", "Write", "NotebookEdit"))
    assert not edit.covers_tool("Read")
    assert all(read.covers_tool(t) for t in ("Read", "Glob", "Grep", "LS"))
    assert not read.covers_tool("Write")
    assert not parse_rule("Write").covers_tool("Edit")


@pytest.mark.parametrize(
    ("spec", "command", "expected"),
    [
        ("npm run test:*", "npm run test", True),
        ("npm run test:*", "npm run test -- --watch", True),
        ("npm run test:*", "npm run testx", False),
        ("git:*", "gitk", False),
        ("ls *", "ls -la", True),
        ("ls *", "ls", True),
        ("ls *", "lsof", False),
        ("git * main", "git push origin main", True),
        ("git * main", "git push origin dev", False),
        ("npm run build", "npm run build", True),
        ("npm run build", "npm  run   build", True),
        ("npm run build", "npm run build --prod", False),
    ],
)
def test_bash_specifiers(spec: str, command: str, expected: bool) -> None:
    assert bash_spec_matches(spec, command) is expected


def test_prefix_rule_also_matches_classifier_prefix() -> None:
    # `git -C dir push` has the prefix "git push"
    assert bash_spec_matches("git push:*", "git -C dir push origin", "git push")


def test_domain() -> None:
    assert domain_matches("domain:example.com", "https://example.com/a")
    assert not domain_matches("domain:example.com", "https://evil-example.com/")
    assert domain_matches("domain:*.example.com", "https://docs.example.com/x")
    assert not domain_matches("domain:example.com", "not a url")


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ("//etc/passwd", "/etc/passwd", True),
        ("//etc", "/etc/ssh/sshd_config", True),  # a directory covers its content
        ("~/.ssh/**", "/home/u/.ssh/id_rsa", True),
        ("/src/**/*.ts", "/ws/src/a/b/c.ts", True),
        ("/src/**/*.ts", "/ws/src/c.ts", True),
        ("/src/*.ts", "/ws/src/a/c.ts", False),
        ("/src/**/*.ts", "/ws/lib/c.ts", False),
        (".env", "/ws/sub/.env", True),  # no slash: any depth below the cwd
        ("*.pem", "/ws/a/b/key.pem", True),
        ("./.env", "/ws/sub/.env", False),
        ("./.env", "/ws/.env", True),
        ("secrets/", "/ws/secrets/x", True),
        ("/build/**", "/ws/buildx/y", False),
    ],
)
def test_path_patterns(spec: str, path: str, expected: bool) -> None:
    pattern = anchor_pattern(spec, base="/ws", cwd="/ws", home="/home/u")
    assert matches(pattern, path) is expected


def test_a_preset_rule_names_a_known_preset_and_matches_its_hosts() -> None:
    assert parse_rule("WebFetch(preset:pypi)").specifier == "preset:pypi"
    with pytest.raises(InvalidRequest, match="no network preset 'pypy'.*npm"):
        parse_rule("WebFetch(preset:pypy)")
    assert domain_matches("preset:pypi", "https://files.pythonhosted.org/x.whl")
    assert domain_matches("preset:npm", "https://registry.npmjs.org/left-pad")
    assert not domain_matches("preset:pypi", "https://registry.npmjs.org/left-pad")
