"""Allow rules cover what will run (issue 8 §3), and why a Bash call was allowed decides
how it runs (Decision.sandbox).

A `Bash(prefix:*)` rule covers a simple command only when its literal text begins with
the prefix; VAR= prefixes and wrappers in front count only when harmless on their own;
whatever else the rule did not see (options before the subcommand, redirections,
expansions, other commands) must be read-only, or the rule does not cover the call and
the usual decision follows.
"""

from __future__ import annotations

import pytest

from .conftest import Env

ASKED = "nobody-attached"


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git status --short",
        "git  status   -sb",
        "git status && ls",
        "ls; git status | head -5",
        "FOO=1 git status",
        "LANG=C git status",
        "timeout 5 git status",
        "git status 2>/dev/null",
        "git status 2>&1 | cat",
        'git status -- "$(printf src)"',
        "if git status; then echo ok; fi",
    ],
)
async def test_a_rule_covers_its_literal_prefix(env: Env, command: str) -> None:
    env.session.allow_rules.append("Bash(git status:*)")
    decision = await env.bash(command)
    # a read-only command a rule lets run: the workspace stays writable, git is neutralised
    assert (decision.behavior, decision.decided_by, decision.sandbox) == (
        "allow",
        "rule",
        "neutralised",
    ), command


@pytest.mark.parametrize(
    "command",
    [
        # options between the program and the subcommand
        "git -c core.fsmonitor=/tmp/x status",
        "git -c core.pager=/tmp/x status",
        "git --git-dir=/tmp/evil status",
        "git --exec-path=/tmp status",
        "git -C /tmp status",
        "git --no-pager -c alias.status=x status",
        # environment in front that the program obeys
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=/tmp/x git status",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='/tmp/x'\" git status",
        "GIT_DIR=/tmp/evil git status",
        "GIT_EXTERNAL_DIFF=/tmp/x git status",
        "LD_PRELOAD=/tmp/x.so git status",
        "PATH=/tmp:$PATH git status",
        "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=x git status",
        # wrappers in front that change what runs
        "sudo git status",
        "sh -c 'git status; touch x'",
        # redirections
        "git status > f",
        "git status >> f",
        "git status &> f",
        "git status 2> err.log",
        "git status >| f",
        "git status | tee f",
        # expansions that run code
        "git status $(touch x)",
        "git status `touch x`",
        "git status <(touch x)",
        'git status "$(rm -rf src)"',
        # other commands
        "git status; touch x",
        "git status && npm publish",
    ],
)
async def test_a_rule_does_not_cover_what_it_did_not_see(env: Env, command: str) -> None:
    env.session.allow_rules.append("Bash(git status:*)")
    decision = await env.bash(command)
    assert decision.decided_by != "rule", command
    if decision.behavior == "allow":
        # the usual decision: only the classifier's verdict let it run, so it runs read-only
        assert (decision.decided_by, decision.sandbox) == ("classifier", "read_only"), command


async def test_the_readme_rules_still_allow_what_they_name(env: Env) -> None:
    env.session.allow_rules += ["Bash(npm run test:*)", "Bash(git commit:*)"]
    for command in (
        "npm run test",
        "npm run test -- --ci | tail -5",
        "NODE_ENV=test npm run test",
        'git commit -m "$(cat msg.txt)"',
        "git commit -am wip && git status",
    ):
        decision = await env.bash(command)
        assert (decision.decided_by, decision.sandbox) == ("rule", "normal"), command
    for command in ("npm run test > out.txt", "git commit -m x; rm -rf build", "npm run build"):
        assert (await env.bash(command)).decided_by == ASKED, command


CODE_RUNNING_GIT = [
    "git -c core.hooksPath=/tmp/evil commit -m x",
    "git -c core.pager=/tmp/evil commit -m x",
    "git -c core.sshCommand=/tmp/evil commit -m x",
    "git -c core.fsmonitor=/tmp/evil commit -m x",
    "git -c alias.commit='!touch /tmp/pwned' commit -m x",
    "git -c include.path=/tmp/evil.cfg commit -m x",
    "git -c user.name=x -c core.hooksPath=/tmp/evil commit -m x",
    "git -c core.hooksPath=/tmp/evil -c user.name=x commit -m x",
    "git -C /tmp/evil commit -m x",
    "git --git-dir=/tmp/evil commit -m x",
    "git --config-env=core.hooksPath=EVIL commit -m x",
]


@pytest.mark.parametrize("command", CODE_RUNNING_GIT)
async def test_a_commit_rule_never_allows_a_git_option_before_the_subcommand(
    env: Env, command: str
) -> None:
    """`Bash(git commit:*)` matches the literal prefix, as Claude Code does: options
    between `git` and `commit` (a `-c` that runs a program above all) are not its to allow.
    A rule carrying an inert `-c` allows that spelling and no `-c` added to it."""
    env.session.allow_rules += ["Bash(git commit:*)", "Bash(git -c user.name=x commit:*)"]
    assert (await env.bash(command)).decided_by == ASKED, command
    assert (await env.bash("git -c user.name=x commit -m x")).decided_by == "rule"


async def test_an_exact_rule_names_the_whole_command(env: Env) -> None:
    env.session.allow_rules.append("Bash(make build > build.log)")
    assert (await env.bash("make build > build.log")).decided_by == "rule"
    assert (await env.bash("make build > other.log")).decided_by == ASKED


# --- why it was allowed decides how it runs --------------------------------------------------


async def test_only_the_classifiers_verdict_runs_read_only(env: Env) -> None:
    ls = await env.bash("ls -la")
    assert (ls.decided_by, ls.sandbox) == ("classifier", "read_only")
    env.session.allow_rules += ["Bash(ls:*)", "Bash(make:*)"]
    assert (await env.bash("ls -la")).sandbox == "neutralised"
    assert (await env.bash("make build")).sandbox == "normal"
    env.session.permission_mode = "bypassPermissions"
    assert (await env.bash("cat x")).sandbox == "normal"


async def test_plan_mode_runs_every_command_read_only(env: Env) -> None:
    env.session.permission_mode = "plan"
    env.session.allow_rules.append("Bash(git status:*)")
    decision = await env.bash("git status")
    assert (decision.behavior, decision.decided_by, decision.sandbox) == (
        "allow",
        "rule",
        "read_only",
    )


async def test_the_journal_says_it_ran_read_only(env: Env) -> None:
    await env.bash("ls")
    assert env.decided()[-1]["reason"].endswith("runs read-only")


async def test_file_tools_are_unaffected(env: Env) -> None:
    (env.ws / "a.txt").write_text("x")
    assert (await env.decide("Read", {"file_path": str(env.ws / "a.txt")})).sandbox == "normal"


async def test_every_combination_of_unseen_parts(env: Env) -> None:
    """Generative: each spelling of what a rule does not see, combined with every other;
    the rule covers the command exactly when every unseen part is harmless."""
    import itertools

    env.session.allow_rules.append("Bash(git status:*)")
    prefixes = {"": True, "FOO=1 ": True, "GIT_CONFIG_COUNT=1 ": False, "LD_PRELOAD=/x ": False}
    wrappers = {"": True, "timeout 5 ": True, "sudo ": False, "env -S 'x' ": False}
    options = {"": True, "-c core.fsmonitor=/x ": False, "--exec-path=/x ": False}
    suffixes = {
        "": True,
        " --short": True,
        " 2>/dev/null": True,
        " | head": True,
        " > f": False,
        " | tee f": False,
        " $(touch x)": False,
        " `touch x`": False,
    }
    for (p, p_ok), (w, w_ok), (o, o_ok), (s, s_ok) in itertools.product(
        prefixes.items(), wrappers.items(), options.items(), suffixes.items()
    ):
        command = f"{p}{w}git {o}status{s}"
        decision = await env.bash(command)
        covered = decision.decided_by == "rule"
        assert covered == (p_ok and w_ok and o_ok and s_ok), command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("npm run build -- --prod", "Bash(npm run build:*)"),
        ("git -c user.name=x commit -m y", "Bash(git -c user.name=x commit:*)"),
        ("FOO=1 make build", "Bash(make:*)"),
    ],
)
async def test_an_always_answer_adds_a_rule_that_covers_the_command(
    env: Env, command: str, rule: str
) -> None:
    decision = await env.bash(command)
    assert f"--allow '{rule}'" in decision.reason, decision.reason
    env.session.allow_rules.append(rule)
    assert (await env.bash(command)).decided_by == "rule", command
