"""agentctl parses a command with a tree that holds only that command (most of a parse's
time is building the others' parsers): what it answers must be what the whole tree
answers, for every command, its errors and the words around it."""

from __future__ import annotations

import argparse

import pytest

from agentd_client.cli.tree import build_parser, command_word, parse_args
from agentd_client.core.exits import Usage

WORDS = [
    ["status"],
    ["--socket", "/s", "status", "--json"],
    ["--socket=/s", "--context", "dev", "call", "-s", "x", "Bash", '{"command": "true"}'],
    ["call", "--session", "x", "--id", "c1", "Read", "{}"],
    ["session", "new", "--workspace", "/w", "--label", "a=b", "--network", "off"],
    ["session", "ls", "--all"],
    ["tasks", "--session", "s"],
    ["tasks", "stop", "t1", "-s", "s"],
    ["mcp", "install", "claude", "--workspace", "/w"],
    ["mcp", "--workspace", "/w"],
    ["context", "add", "dev", "--address", "h:1", "--use"],
    ["perms", "-s", "x", "--mode", "plan", "--allow", "Bash(ls:*)"],
    ["exec", "-s", "x", "--", "ls", "-l"],
    ["forward", "-s", "x", "8080"],
    ["completion", "bash"],
    ["agent", "--workspace", "/w", "fix it"],
    ["trust", "approve", "/w", "--yes"],
    ["checkpoints", "-s", "x"],
    # Errors: each must be the whole tree's, word for word.
    ["statu"],
    ["status", "--no-such-option"],
    ["session"],
    ["session", "new"],
    ["perms", "--mode", "nope"],
    ["mcp", "install", "vim", "--workspace", "/w"],
    ["--sock", "/s", "status"],  # an abbreviated option: the whole tree reads it
    ["--context", "status", "call", "-s", "x", "Bash", "{}"],
    ["--cont", "status", "call", "-s", "x", "Bash", "{}"],
    [],
]


def _whole(words: list[str]) -> argparse.Namespace | str:
    try:
        return build_parser().parse_args(words)
    except Usage as exc:
        return f"Usage: {exc.message}"


def _pruned(words: list[str]) -> argparse.Namespace | str:
    try:
        return parse_args(words)
    except Usage as exc:
        return f"Usage: {exc.message}"


@pytest.mark.parametrize("words", WORDS, ids=" ".join)
def test_a_tree_of_one_command_answers_as_the_whole_tree(words: list[str]) -> None:
    assert _pruned(words) == _whole(words)


def test_every_command_alone_parses_as_in_the_whole_tree() -> None:
    whole = build_parser()
    subparsers = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        alone = build_parser(name)
        alone_sub = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert list(alone_sub.choices) == [name]
        # The same parser: the same help, so the same options and subcommands.
        assert alone_sub.choices[name].format_help() == sub.format_help(), name


def test_the_command_word_is_read_past_the_options_before_it() -> None:
    assert command_word(["--socket", "/s", "--ca=c", "status"]) == "status"
    assert command_word(["--context", "call", "status"]) == "status"
    assert command_word(["--help", "status"]) is None
    assert command_word(["--sock", "/s", "status"]) is None
    assert command_word(["--", "status"]) is None
    assert command_word(["--socket"]) is None
