"""`dangerouslyDisableSandbox` (issue 7 item 6): it does what its name says, only in a
session whose policy allows unsandboxed commands, and only when a person approves that
exact call: no mode, rule or hook allows it, and no "always" answer is offered.
"""

from __future__ import annotations

import asyncio

import pytest

from .conftest import Env, attached

ASKED = "nobody-attached"


def _call(command: str = "ls") -> dict[str, object]:
    return {"command": command, "dangerouslyDisableSandbox": True}


async def test_refused_when_the_session_does_not_allow_it(env: Env) -> None:
    env.session.permission_mode = "bypassPermissions"
    decision = await env.decide("Bash", _call())
    assert decision.behavior == "deny"
    assert "does not allow unsandboxed commands" in decision.reason


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
async def test_no_mode_or_rule_allows_it_unasked(env: Env, mode: str) -> None:
    env.session.allow_unsandboxed = True
    env.session.permission_mode = mode
    env.session.allow_rules += ["Bash", "Bash(ls:*)"]
    decision = await env.decide("Bash", _call("ls"))
    assert (decision.behavior, decision.decided_by) == ("deny", ASKED)
    assert "outside the sandbox" in decision.reason


@pytest.mark.parametrize(("mode", "by"), [("dontAsk", "mode"), ("plan", "mode")])
async def test_dont_ask_and_plan_deny_it(env: Env, mode: str, by: str) -> None:
    env.session.allow_unsandboxed = True
    env.session.permission_mode = mode
    decision = await env.decide("Bash", _call("ls"))
    assert (decision.behavior, decision.decided_by) == ("deny", by)


async def test_deny_rules_still_deny(env: Env) -> None:
    env.session.allow_unsandboxed = True
    env.session.deny_rules.append("Bash(curl:*)")
    assert (await env.decide("Bash", _call("curl x"))).decided_by == "rule"


async def test_a_person_approves_it_once_and_it_runs_unsandboxed(env: Env) -> None:
    env.session.allow_unsandboxed = True
    async with attached(env.log) as watcher:
        pending = asyncio.ensure_future(env.decide("Bash", _call("make install")))
        asked = (await watcher.next("permission_requested")).payload
        assert asked["suggested_rule"] == ""  # no "always": each such call is asked
        assert any("outside the sandbox" in r for r in asked["reasons"])
        env.engine.asker.resolve(env.session.id, asked["request_id"], "allow", "always")
        decision = await pending
    assert (decision.behavior, decision.sandbox) == ("allow", "unsandboxed")
    assert env.session.allow_rules == []
    # the next one asks again
    assert (await env.decide("Bash", _call("make install"))).decided_by == ASKED


async def test_without_the_flag_nothing_changes(env: Env) -> None:
    env.session.allow_unsandboxed = True
    env.session.permission_mode = "bypassPermissions"
    decision = await env.decide("Bash", {"command": "make install"})
    assert (decision.behavior, decision.sandbox) == ("allow", "normal")
