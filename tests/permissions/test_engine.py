"""agentd/permissions/engine.py: the decision order, modes, rule sources, Bash and paths.

With no client attached an "ask" is denied at once with decided_by "nobody-attached",
which is how these tests see that a call would have asked.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from agentd.foundation.errors import InvalidRequest
from agentd.permissions import PermissionEngine

from .conftest import Env

ASKED = "nobody-attached"


# --- modes ---------------------------------------------------------------------------------


async def test_default_mode_runs_reads_and_read_only_bash_asks_for_the_rest(env: Env) -> None:
    assert (await env.decide("Read", {"file_path": str(env.ws / "a.py")})).behavior == "allow"
    assert (await env.decide("LS", {})).behavior == "allow"
    assert (await env.bash("git status && ls -la | head")).decided_by == "classifier"
    assert (await env.bash("git status && ls -la | head")).behavior == "allow"
    assert (await env.bash("npm install")).decided_by == ASKED
    assert (await env.decide("Edit", {"file_path": "a.py"})).decided_by == ASKED
    assert (await env.decide("WebFetch", {"url": "https://x.org"})).decided_by == ASKED
    assert (await env.decide("TodoWrite", {"todos": []})).behavior == "allow"
    assert (await env.decide("Frobnicate", {})).decided_by == ASKED


async def test_accept_edits_runs_edits_inside_the_workspace_only(env: Env) -> None:
    env.session.permission_mode = "acceptEdits"
    for tool in ("Edit", "Write", "MultiEdit"):
        assert (await env.decide(tool, {"file_path": "src/a.py"})).behavior == "allow"
    outside = await env.decide("Write", {"file_path": str(env.tmp / "elsewhere.txt")})
    assert outside.decided_by == ASKED
    assert (await env.bash("rm build.log")).decided_by == ASKED


async def test_plan_mode_denies_anything_not_read_only_with_a_message(env: Env) -> None:
    env.session.permission_mode = "plan"
    assert (await env.bash("grep -r foo .")).behavior == "allow"
    assert (await env.decide("Read", {"file_path": "a.py"})).behavior == "allow"
    assert (await env.decide("TodoWrite", {"todos": []})).behavior == "allow"
    for decision in (
        await env.bash("make install"),
        await env.decide("Edit", {"file_path": "a.py"}),
    ):
        assert decision.behavior == "deny"
        assert decision.decided_by == "mode"
        assert "plan mode" in decision.reason and "read-only" in decision.reason
    # allow rules do not lift plan mode
    env.session.allow_rules.append("Bash(make:*)")
    assert (await env.bash("make install")).decided_by == "mode"


async def test_bypass_runs_all_but_deny_rules(env: Env) -> None:
    env.session.permission_mode = "bypassPermissions"
    env.session.ask_rules.append("Bash(git push:*)")
    env.session.deny_rules.append("Bash(curl:*)")
    assert (await env.bash("npm install && git push")).behavior == "allow"
    outside = env.tmp / "out.txt"
    ctx = env.ctx()
    assert (await env.decide("Write", {"file_path": str(outside)}, ctx)).behavior == "allow"
    assert ctx.granted_paths == [str(outside)]
    assert (await env.bash("curl https://x.org")).behavior == "deny"


async def test_dont_ask_turns_ask_into_deny(env: Env) -> None:
    env.session.permission_mode = "dontAsk"
    env.session.allow_rules.append("Bash(npm test:*)")
    assert (await env.bash("npm test")).behavior == "allow"
    decision = await env.bash("npm install")
    assert (decision.behavior, decision.decided_by) == ("deny", "mode")
    assert "dontAsk" in decision.reason
    assert (await env.bash("ls")).behavior == "allow"


# --- rules and their sources ---------------------------------------------------------------


async def test_rule_order_deny_then_ask_then_allow(env: Env) -> None:
    env.session.allow_rules.append("Bash(git:*)")
    env.session.ask_rules.append("Bash(git push:*)")
    env.session.deny_rules.append("Bash(git push --force:*)")
    assert (await env.bash("git commit -m x")).behavior == "allow"
    assert (await env.bash("git push origin main")).decided_by == ASKED
    denied = await env.bash("git push --force origin main")
    assert (denied.behavior, denied.decided_by) == ("deny", "rule")
    assert "git push --force:*" in denied.reason


async def test_config_rules(make_env: Callable[..., Env]) -> None:
    env = make_env(allow_rules=["Bash(npm test:*)"], deny_rules=["Read(//etc/shadow)"])
    assert (await env.bash("npm test -- -x")).decided_by == "rule"
    denied = await env.decide("Read", {"file_path": "/etc/shadow"})
    assert denied.behavior == "deny" and "daemon config" in denied.reason


def test_bad_config_rule_stops_start_up(make_env: Callable[..., Env]) -> None:
    with pytest.raises(InvalidRequest, match="deny_rules"):
        make_env(deny_rules=["Bash(ls"])


async def test_settings_json_and_local_rules_and_reload(env: Env) -> None:
    env.settings({"permissions": {"allow": ["Bash(make:*)"], "deny": ["Edit(/secrets/**)"]}})
    env.settings({"permissions": {"allow": ["Bash(cargo build:*)"]}}, "settings.local.json")
    env.trust_all()  # allow rules widen: they apply to trusted content only
    env.session.permission_mode = "acceptEdits"
    assert (await env.bash("make -j4")).decided_by == "rule"
    assert (await env.bash("cargo build --release")).decided_by == "rule"
    denied = await env.decide("Write", {"file_path": "secrets/key.txt"})
    assert denied.behavior == "deny" and "settings.json" in denied.reason
    assert (await env.decide("Write", {"file_path": "src/key.txt"})).behavior == "allow"
    # an edit of the file applies to the next call (mtime/size change)
    env.settings({"permissions": {"deny": ["Bash(make:*)"]}})
    assert (await env.bash("make -j4")).behavior == "deny"


async def test_settings_default_mode_and_additional_directories(env: Env) -> None:
    extra = env.tmp / "shared"
    extra.mkdir()
    env.settings({"permissions": {"defaultMode": "plan", "additionalDirectories": [str(extra)]}})
    env.trust()  # additionalDirectories widens: trusted content only
    assert (await env.bash("touch x")).reason.count("plan mode") == 1
    ctx = env.ctx()
    assert (await env.decide("Read", {"file_path": str(extra / "f")}, ctx)).behavior == "allow"
    assert ctx.granted_paths == [str(extra)]  # the tool may open it now


async def test_untrusted_workspace_cannot_bypass(env: Env) -> None:
    env.settings({"permissions": {"defaultMode": "bypassPermissions"}})
    assert (await env.bash("npm install")).decided_by == ASKED


async def test_broken_settings_file_is_ignored(env: Env) -> None:
    (env.ws / ".claude").mkdir()
    (env.ws / ".claude" / "settings.json").write_text("{not json")
    assert (await env.bash("ls")).behavior == "allow"


async def test_path_rules_for_read_and_edit(env: Env) -> None:
    env.session.allow_rules += ["Read(~/notes/**)", "Edit(//opt/app/conf/*)"]
    env.session.deny_rules.append("Read(.env)")
    ctx = env.ctx()
    notes = env.home / "notes" / "todo.md"
    assert (await env.decide("Read", {"file_path": str(notes)}, ctx)).decided_by == "rule"
    assert ctx.granted_paths == [str(notes)]
    assert (await env.decide("Grep", {"path": str(env.home / "notes")})).behavior == "allow"
    assert (await env.decide("Write", {"file_path": "/opt/app/conf/a.ini"})).behavior == "allow"
    # gitignore: `conf/*` matches the directory conf/x, so what is inside it too
    assert (await env.decide("Edit", {"file_path": "/opt/app/conf/x/a.ini"})).behavior == "allow"
    assert (await env.decide("Edit", {"file_path": "/opt/app/b.ini"})).decided_by == ASKED
    denied = await env.decide("Read", {"file_path": "sub/.env"})
    assert (denied.behavior, denied.decided_by) == ("deny", "rule")


async def test_webfetch_domain_rule(env: Env) -> None:
    env.session.allow_rules.append("WebFetch(domain:docs.python.org)")
    ok = await env.decide("WebFetch", {"url": "https://docs.python.org/3/"})
    assert ok.behavior == "allow"
    assert (await env.decide("WebFetch", {"url": "https://pypi.org/"})).decided_by == ASKED


async def test_bare_tool_rule(env: Env) -> None:
    env.session.allow_rules.append("Frobnicate")
    assert (await env.decide("Frobnicate", {})).decided_by == "rule"


# --- Bash: compound commands and wrappers ----------------------------------------------------


async def test_compound_denied_if_any_part_matches_a_deny_rule(env: Env) -> None:
    env.session.deny_rules.append("Bash(rm:*)")
    for command in (
        "ls && rm -f x",
        "echo hi; sudo rm -f x",
        "FOO=1 timeout 5 rm -f x",
        "true || env A=1 nice rm x",
        "(cd sub && rm x)",
    ):
        decision = await env.bash(command)
        assert decision.behavior == "deny", command


async def test_compound_allowed_only_if_every_part_is_allowed_or_read_only(env: Env) -> None:
    env.session.allow_rules.append("Bash(npm run test:*)")
    assert (await env.bash("npm run test && git status")).decided_by == "rule"
    assert (await env.bash("FOO=1 npm run test -- --ci | tail -5")).decided_by == "rule"
    assert (await env.bash("npm run test && npm publish")).decided_by == ASKED
    # a redirect writing a file is not a read-only part
    assert (await env.bash("npm run test; ls > files.txt")).decided_by == ASKED


async def test_suggested_rule_is_the_prefix_of_the_command_that_needs_approval(env: Env) -> None:
    decision = await env.bash("git status && npm run build -- --prod")
    assert "Bash(npm run build:*)" in decision.reason
    assert "agentctl perms --session" in decision.reason
    assert f"agentctl attach {env.session.id}" in decision.reason


# --- the critical rm check --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf /*",
        "sudo rm -fr /",
        "rm -rf ~",
        "rm -rf ~/",
        "rm -rf $HOME",
        'rm -rf "$HOME"',
        "rm -r ${HOME}/",
        "rm -rf {ws}",
        "rm -rf {parent}",
        "rm -rf .",
        "rm -rf *",
        "rm -rf ..",
        "cd .. && rm -rf ws",
        "rm --recursive --force -- {ws}",
        "rm -rf $UNSET_VAR",
    ],
)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
async def test_critical_rm_asks_in_every_mode(env: Env, command: str, mode: str) -> None:
    env.session.permission_mode = mode
    env.session.allow_rules.append("Bash(rm:*)")
    command = command.replace("{ws}", str(env.ws)).replace("{parent}", str(env.ws.parent))
    decision = await env.bash(command)
    assert (decision.behavior, decision.decided_by) == ("deny", ASKED), command
    assert "remove" in decision.reason


@pytest.mark.parametrize(
    "command", ["rm -rf build", "rm -rf ./node_modules /tmp/x", "rm -rf $OUT/build", "rm x"]
)
async def test_ordinary_rm_is_not_critical(env: Env, command: str) -> None:
    env.session.permission_mode = "bypassPermissions"
    assert (await env.bash(command)).behavior == "allow"


async def test_critical_rm_in_dont_ask_and_plan_is_denied(env: Env) -> None:
    env.session.permission_mode = "dontAsk"
    assert (await env.bash("rm -rf /")).decided_by == "mode"
    env.session.permission_mode = "plan"
    assert "plan mode" in (await env.bash("rm -rf /")).reason


# --- paths outside the workspace ---------------------------------------------------------------


async def test_reads_outside_the_workspace_ask_but_task_output_is_readable(env: Env) -> None:
    assert (await env.decide("Read", {"file_path": "/etc/hosts"})).decided_by == ASKED
    assert (await env.decide("Read", {"file_path": "../x"})).decided_by == ASKED
    ctx = env.ctx()
    output = os.path.join(ctx.state_dir, "tasks", "t1.out")
    decision = await env.decide("Read", {"file_path": output}, ctx)
    assert decision.behavior == "allow" and ctx.granted_paths == []


async def test_session_additional_dirs_are_inside(env: Env) -> None:
    extra = env.tmp / "extra"
    env.session.additional_dirs.append(str(extra))
    env.session.permission_mode = "acceptEdits"
    ctx = env.ctx()
    assert (await env.decide("Edit", {"file_path": str(extra / "a")}, ctx)).behavior == "allow"
    assert ctx.granted_paths == []


# --- the journal -------------------------------------------------------------------------------


async def test_every_decision_is_journaled(env: Env) -> None:
    env.session.deny_rules.append("Bash(curl:*)")
    ctx = env.ctx()
    await env.decide("Bash", {"command": "ls"}, ctx)
    await env.bash("curl x")
    await env.bash("make")
    rows = env.decided()
    assert rows[0] == {
        "tool_use_id": ctx.tool_use_id,
        "tool_name": "Bash",
        "behavior": "allow",
        "decided_by": "classifier",
        "reason": "read-only command; runs read-only",
    }
    assert [(r["behavior"], r["decided_by"]) for r in rows[1:]] == [
        ("deny", "rule"),
        ("ask", "classifier"),
        ("deny", "nobody-attached"),
    ]


def test_engine_is_a_permission_checker(env: Env) -> None:
    assert isinstance(env.engine, PermissionEngine)
    assert callable(env.engine.decide) and callable(env.engine.after_call)


async def test_whitespace_around_a_path_does_not_slip_past_a_deny_rule(env: Env) -> None:
    # The tools drop the whitespace a model leaves around a path (as the reference
    # does); the rules must judge that same path, not "<cwd>/ .env".
    env.session.deny_rules.append("Read(.env)")
    for raw in (" .env", ".env\n", f"  {env.ws}/.env\t"):
        denied = await env.decide("Read", {"file_path": raw})
        assert (denied.behavior, denied.decided_by) == ("deny", "rule"), raw
