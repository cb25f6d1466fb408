"""agentd/permissions/asker.py through the engine: PermissionRequested to every attached
client, the first answer wins, timeouts and cancellation deny."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agentd.sessions.event_types import PermissionResolved

from .conftest import Env, attached


async def test_two_clients_first_answer_wins_the_other_sees_it(env: Env) -> None:
    async with attached(env.log) as a, attached(env.log) as b:
        ctx = env.ctx()
        pending = asyncio.ensure_future(env.decide("Bash", {"command": "npm install"}, ctx))
        asked = (await a.next("permission_requested")).payload
        assert (await b.next("permission_requested")).payload == asked
        assert asked["tool_use_id"] == ctx.tool_use_id
        assert asked["tool_name"] == "Bash"
        assert asked["input"] == {"command": "npm install"}
        assert asked["suggested_rule"] == "Bash(npm install:*)"
        assert asked["reasons"] and asked["expires_ms"] > 0
        # The caller's stream names the request (its code is shown) and who may answer.
        assert env.progress == [
            {
                "message": "waiting for permission",
                "permission_request_id": asked["request_id"],
                "attached_clients": 2,
            }
        ]

        accepted, _ = env.engine.asker.resolve(
            env.session.id, asked["request_id"], "allow", "once", decided_by="person via a"
        )
        assert accepted
        decision = await pending
        assert (decision.behavior, decision.decided_by) == ("allow", "person via a")
        resolved = (await b.next("permission_resolved")).body
        assert resolved == PermissionResolved(
            request_id=asked["request_id"],
            decision="allow",
            scope="once",
            decided_by="person via a",
        )
        late, message = env.engine.asker.resolve(
            env.session.id, asked["request_id"], "deny", "once", decided_by="person via b"
        )
        assert not late and "already resolved" in message and "person via a" in message
    assert env.session.allow_rules == []  # "once" adds no rule


async def test_always_adds_the_suggested_session_rule(env: Env) -> None:
    async with attached(env.log) as a:
        pending = asyncio.ensure_future(env.decide("Bash", {"command": "npm run build"}))
        asked = (await a.next("permission_requested")).payload
        env.engine.asker.resolve(env.session.id, asked["request_id"], "allow", "always")
        assert (await pending).behavior == "allow"
    assert env.session.allow_rules == ["Bash(npm run build:*)"]
    # the next such call needs no one: the new rule allows it
    assert (await env.decide("Bash", {"command": "npm run build -- --prod"})).decided_by == "rule"


async def test_person_denies_and_deny_always_adds_a_deny_rule(env: Env) -> None:
    async with attached(env.log) as a:
        pending = asyncio.ensure_future(env.decide("Write", {"file_path": "/opt/x.conf"}))
        asked = (await a.next("permission_requested")).payload
        assert asked["suggested_rule"] == "Edit(//opt/x.conf)"
        env.engine.asker.resolve(env.session.id, asked["request_id"], "deny", "always")
        decision = await pending
    assert decision.behavior == "deny" and "denied" in decision.reason
    assert env.session.deny_rules == ["Edit(//opt/x.conf)"]


async def test_allowed_outside_path_is_granted(env: Env) -> None:
    async with attached(env.log) as a:
        ctx = env.ctx()
        pending = asyncio.ensure_future(env.decide("Read", {"file_path": "/etc/hosts"}, ctx))
        asked = (await a.next("permission_requested")).payload
        env.engine.asker.resolve(env.session.id, asked["request_id"], "allow", "once")
        assert (await pending).behavior == "allow"
    assert ctx.granted_paths == ["/etc/hosts"]


async def test_no_answer_in_time_is_a_deny(make_env: Callable[..., Env]) -> None:
    env = make_env(permission_timeout_seconds=0.3)
    async with attached(env.log) as a:
        decision = await env.decide("Bash", {"command": "npm install"})
        assert (decision.behavior, decision.decided_by) == ("deny", "timeout")
        assert "nobody answered" in decision.reason
        resolved = (await a.next("permission_resolved")).payload
        assert resolved["decided_by"] == "timeout" and resolved["decision"] == "deny"
        late, message = env.engine.asker.resolve(
            env.session.id, resolved["request_id"], "allow", "once"
        )
        assert not late and "timeout" in message


async def test_nobody_attached_is_an_immediate_deny_saying_how_to_allow(env: Env) -> None:
    decision = await env.decide("Bash", {"command": "npm test"})
    assert (decision.behavior, decision.decided_by) == ("deny", "nobody-attached")
    sid = env.session.id
    assert f"agentctl attach {sid}" in decision.reason
    assert f"agentctl perms --session {sid} --allow 'Bash(npm test:*)'" in decision.reason
    assert "--mode" in decision.reason
    assert env.engine.asker.pending_ids(sid) == []


async def test_cancelling_the_call_ends_the_request(env: Env) -> None:
    async with attached(env.log) as a:
        ctx = env.ctx()
        pending = asyncio.ensure_future(env.decide("Bash", {"command": "npm i"}, ctx))
        await a.next("permission_requested")
        ctx.cancelled.set()
        decision = await pending
        assert (decision.behavior, decision.decided_by) == ("deny", "cancelled")
        assert (await a.next("permission_resolved")).payload["decided_by"] == "cancelled"


def test_unknown_request(env: Env) -> None:
    accepted, message = env.engine.asker.resolve(env.session.id, "perm_nope", "allow", "once")
    assert not accepted and "no pending permission request" in message
