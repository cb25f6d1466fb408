"""agentd/calls/executor.py in-process, with tools and a permission checker of the test's
own and a real store: each step of a call's lifecycle, and every way it fails, is an
is_error result and a journaled call_finished, never an exception."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentd.calls.executor import Executor, ToolUse, Update, result_payload
from agentd.foundation.errors import ToolError
from agentd.permissions.decision import Behavior, Decision
from agentd.sessions.event_types import Progress
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools import Registry
from agentd.tools.base import ReadOnlyTool, Tool, ToolContext, ToolResult
from tests.support.services import config_under, make_services

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "mode": {"type": "string"}},
    "required": ["n"],
    "additionalProperties": False,
}


class Echo(ReadOnlyTool):
    """Read-only and concurrency-safe: answers its input; waits when told to."""

    name: ClassVar[str] = "Echo"
    description: ClassVar[str] = "echo"
    input_schema: ClassVar[dict[str, Any]] = SCHEMA
    running: ClassVar[list[str]] = []

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        Echo.running.append(ctx.tool_use_id)
        await ctx.progress(output="half", message="working")
        if args.get("mode") == "wait":
            await ctx.cancelled.wait()
            return ToolResult.text("stopped early", is_error=True)
        if args.get("mode") == "big":
            return ToolResult.text("x" * 5000)
        return ToolResult.text(f"n={args['n']}")


class Fails(Tool):
    """Writes (not read-only): fails in the way its input says."""

    name: ClassVar[str] = "Fails"
    description: ClassVar[str] = "fails"
    input_schema: ClassVar[dict[str, Any]] = SCHEMA

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        mode = args.get("mode")
        if mode == "tool":
            raise ToolError("it said no")
        if mode == "os":
            raise FileNotFoundError(2, "No such file or directory", "/nowhere")
        if mode == "crash":
            raise ZeroDivisionError("boom")
        return ToolResult.text("wrote")


Echo.max_result_chars = 100  # type: ignore[misc]


@dataclass
class Checker:
    """Allows, or denies what `deny` names; rewrites `n` when `rewrite` is set."""

    deny: set[str] = field(default_factory=set)
    rewrite: dict[str, Any] | None = None
    decided: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    async def decide(
        self, session: Session, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> Decision:
        self.decided.append((tool.name, dict(args)))
        if tool.name in self.deny:
            return Decision(Behavior.DENY, reason=f"{tool.name} is denied by a test rule")
        return Decision(Behavior.ALLOW, updated_input=self.rewrite)

    async def after_call(
        self,
        session: Session,
        tool: Tool,
        args: dict[str, Any],
        result: ToolResult,
        ctx: ToolContext,
    ) -> None:
        self.after.append(ctx.tool_use_id)


@dataclass
class Env:
    executor: Executor
    checker: Checker
    session: Session
    sessions: SessionManager
    updates: list[tuple[str, dict[str, Any]]]

    async def sink(self, update: Update) -> None:
        if isinstance(update, Progress):
            self.updates.append(("progress", dataclasses.asdict(update)))
        else:
            self.updates.append(("result", dict(update)))

    async def one(self, name: str, args: dict[str, Any], use: str = "toolu_1") -> ToolResult:
        return await self.executor.run_one(self.session, ToolUse(use, name, args), self.sink)

    async def kinds(self) -> list[str]:
        return [e.kind async for e in self.sessions.log(self.session.id).replay()]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    config = config_under(tmp_path / "daemon")
    store = Store(str(tmp_path / "agentd.db"))
    sessions = SessionManager(store, config)
    ws = tmp_path / "ws"
    ws.mkdir()
    session = sessions.create([str(ws)])
    checker = Checker()
    registry = Registry([Echo(), Fails()])
    executor = Executor(registry, sessions, config, checker, make_services(config, store))
    Echo.running.clear()
    yield Env(executor, checker, session, sessions, [])
    store.close()


async def test_a_call_is_decided_run_and_journaled(env: Env) -> None:
    result = await env.one("Echo", {"n": "3"})  # "3": a model's slip, coerced
    assert not result.is_error and result.text_content() == "n=3"
    assert env.checker.decided == [("Echo", {"n": 3})]
    assert env.checker.after == ["toolu_1"]
    assert [k for k, _ in env.updates] == ["progress"]
    assert env.updates[0][1]["output"] == "half"
    kinds = await env.kinds()
    assert kinds[0] == "call_started" and kinds[-1] == "call_finished"
    assert result.payload == result_payload("toolu_1", result)


@pytest.mark.parametrize(
    ("name", "args", "says"),
    [
        ("Nope", {"n": 1}, "No such tool available: Nope"),
        ("Echo", {"n": "many"}, "n"),  # the schema refuses, naming the parameter
        ("Echo", {"n": 1, "extra": True}, "extra"),
        ("Fails", {"n": 1, "mode": "tool"}, "it said no"),
        (
            "Fails",
            {"n": 1, "mode": "os"},
            "could not complete: No such file or directory (/nowhere)",
        ),
        ("Fails", {"n": 1, "mode": "crash"}, "failed unexpectedly: ZeroDivisionError: boom"),
    ],
)
async def test_every_failure_is_a_result(
    env: Env, name: str, args: dict[str, Any], says: str
) -> None:
    result = await env.one(name, args)
    assert result.is_error
    assert says in result.text_content()
    assert (await env.kinds())[-1] == "call_finished"


async def test_a_denial_runs_nothing(env: Env) -> None:
    env.checker.deny.add("Fails")
    result = await env.one("Fails", {"n": 1})
    assert result.is_error and "denied by a test rule" in result.text_content()
    assert env.checker.after == []


async def test_a_rewritten_input_is_checked_again(env: Env) -> None:
    env.checker.rewrite = {"n": "not a number"}
    result = await env.one("Echo", {"n": 1})
    assert result.is_error and Echo.running == []


async def test_a_result_over_the_budget_is_saved_to_a_file(env: Env) -> None:
    result = await env.one("Echo", {"n": 1, "mode": "big"})
    text = result.text_content()
    assert not result.is_error and len(text) < 5000
    saved = re.search(r"saved to: (\S+)", text)
    assert saved is not None, text
    assert Path(saved.group(1)).read_text() == "x" * 5000


async def test_a_batch_runs_safe_calls_together_and_keeps_the_order(env: Env) -> None:
    calls = [
        ToolUse("a", "Echo", {"n": 1}),
        ToolUse("b", "Echo", {"n": 2}),
        ToolUse("c", "Fails", {"n": 3}),
        ToolUse("d", "Echo", {"n": 4}),
    ]
    results = await env.executor.run_batch(env.session, calls, env.sink)
    assert [r.text_content() for r in results] == ["n=1", "n=2", "wrote", "n=4"]
    finished = [p["tool_use_id"] for k, p in env.updates if k == "result"]
    assert finished == ["a", "b", "c", "d"]


async def test_cancel_lets_a_call_end_itself(env: Env) -> None:
    task = asyncio.ensure_future(env.one("Echo", {"n": 1, "mode": "wait"}, use="toolu_w"))
    while "toolu_w" not in Echo.running:
        await asyncio.sleep(0)
    assert env.executor.running_count == 1
    assert env.executor.cancel(env.session.id, "toolu_w")
    assert not env.executor.cancel(env.session.id, "toolu_unknown")
    result = await asyncio.wait_for(task, 30)
    assert result.is_error and result.text_content() == "stopped early"
    assert env.executor.running_count == 0


async def test_a_caller_that_goes_away_cancels_the_call(env: Env) -> None:
    task = asyncio.ensure_future(env.one("Echo", {"n": 1, "mode": "wait"}, use="toolu_g"))
    while "toolu_g" not in Echo.running:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.executor.running_count == 0
    assert (await env.kinds())[-1] == "call_finished"  # its end is journaled all the same
