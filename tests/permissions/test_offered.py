"""agentd/permissions/offered.py: the rules "always" offers come from the classifier's
words, and each one, once added, lets the very command it was offered for run.

The class of commands the issue names (quotes with `;` inside, pipes, `&&`, VAR=
prefixes, subshells, redirections) and every command of the classifier's corpus that
asks: each offered rule parses back to itself, and with it in the session's allow rules
the engine allows the same command by that rule (not by asking again).
"""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest

from agentd.permissions.rules import parse_rule

from .conftest import Env, attached

CORPUS = tomllib.loads((Path(__file__).parents[1] / "bashsec" / "corpus.toml").read_text("utf-8"))[
    "case"
]

# (command, the rules offered, broadest first)
CLASS = [
    (
        "python3 -c 'from x import y; print(1)'",
        ["Bash(python3:*)", "Bash(python3 -c:*)", "Bash(python3 -c 'from x import y; print(1)')"],
    ),
    (
        "git commit -m 'fix: a; b'",
        ["Bash(git commit:*)", "Bash(git commit -m:*)", "Bash(git commit -m 'fix: a; b')"],
    ),
    (
        "cat a.txt | python3 x.py",
        ["Bash(python3:*)", "Bash(python3 x.py)", "Bash(cat a.txt | python3 x.py)"],
    ),
    (
        "cd sub && npm test -- --watch",
        [
            "Bash(npm test:*)",
            "Bash(npm test --:*)",
            "Bash(npm test -- --watch)",
            "Bash(cd sub && npm test -- --watch)",
        ],
    ),
    (
        "FOO=1 npm run build",
        ["Bash(npm run build:*)", "Bash(npm run build)", "Bash(FOO=1 npm run build)"],
    ),
    (
        "(cd sub; make clean)",
        ["Bash(make:*)", "Bash(make clean)", "Bash((cd sub; make clean))"],
    ),
    # The redirection writes whatever the command is: only the whole command covers it.
    ("cat a.txt | python3 x.py > out.txt", ["Bash(cat a.txt | python3 x.py > out.txt)"]),
    ("echo hi > f.txt", ["Bash(echo hi > f.txt)"]),
    # Two commands that need approval: no rule for one of them covers the call.
    ("npm install && npm test", ["Bash(npm install && npm test)"]),
    # A rule cannot see through `sudo`: only the command exactly.
    ("sudo apt-get install x", ["Bash(sudo apt-get install x)"]),
    # A `*` would match more than the command shown: the prefix alone.
    ("rm *.pyc", ["Bash(rm:*)"]),
    # git's options before the subcommand, as written (`Bash(git commit:*)` does not
    # match these spellings, in Claude Code nor here): an inert `-c`, a `-C dir`.
    (
        "git -c user.name=x commit -m y",
        [
            "Bash(git -c user.name=x commit:*)",
            "Bash(git -c user.name=x commit -m:*)",
            "Bash(git -c user.name=x commit -m y)",
        ],
    ),
    (
        "git -C sub --no-pager commit -m y",
        [
            "Bash(git -C sub --no-pager commit:*)",
            "Bash(git -C sub --no-pager commit -m:*)",
            "Bash(git -C sub --no-pager commit -m y)",
        ],
    ),
    # A `-c` that names a program: only the command exactly, never a prefix.
    ("git -c core.hooksPath=/evil commit -m y", ["Bash(git -c core.hooksPath=/evil commit -m y)"]),
    ("git -c user.name=x -c alias.ci=!sh ci", ["Bash(git -c user.name=x -c alias.ci=!sh ci)"]),
]


async def _choose(env: Env, command: str, pick: int | None) -> tuple[str, ...]:
    """Ask about `command` with a client attached; answer "always" with the `pick`-th
    rule offered (None: deny once). The rules offered."""
    async with attached(env.log) as person:
        pending = asyncio.ensure_future(env.bash(command))
        asked = (await person.next("permission_requested")).payload
        choices = tuple(asked["rule_choices"])
        assert asked["suggested_rule"] == (choices[0] if choices else "")
        if pick is None:
            scope, decision, rule = "once", "deny", ""
        else:
            scope, decision, rule = "always", "allow", choices[pick]
        accepted, message = env.engine.asker.resolve(
            env.session.id, asked["request_id"], decision, scope, decided_by="person", rule=rule
        )
        assert accepted, message
        await pending
    return choices


async def _each_choice_allows(env: Env, command: str) -> tuple[str, ...]:
    """Every rule offered for `command`, chosen in turn: it is the rule added, it parses
    back to itself, and the same command then runs by that rule, unasked."""
    offered = await _choose(env, command, None)
    for i, rule in enumerate(offered):
        env.session.allow_rules.clear()
        await _choose(env, command, i)
        assert env.session.allow_rules == [rule]
        assert parse_rule(rule).text == rule
        again = await env.bash(command)  # nobody attached now: an ask would be a deny
        assert (again.behavior, again.decided_by) == ("allow", "rule"), (command, rule)
    env.session.allow_rules.clear()
    return offered


@pytest.mark.parametrize(("command", "offered"), CLASS, ids=[c for c, _ in CLASS])
async def test_the_rules_offered_and_each_allows_its_command(
    env: Env, command: str, offered: list[str]
) -> None:
    assert list(await _each_choice_allows(env, command)) == offered


async def test_every_asking_command_of_the_corpus_is_offered_rules_that_allow_it(
    env: Env,
) -> None:
    """Each command of the classifier's corpus that asks gets a rule (unless its text
    holds a `*`, which no exact rule can say), and every rule offered does its job."""
    checked = 0
    for case in CORPUS:
        command = case.get("command")
        if command is None:
            continue  # a generated one (10,001 characters)
        if (await env.bash(command)).decided_by != "nobody-attached":
            continue  # runs unasked (read-only), or is refused outright
        offered = await _each_choice_allows(env, command)
        critical = "rm" in command or "-delete" in command  # asks with no rule to offer
        assert offered or "*" in command or critical, command
        checked += 1
    assert checked > 200, checked
