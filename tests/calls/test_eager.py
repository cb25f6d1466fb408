"""eager.start: a coroutine that never waits costs no Task; one that waits carries on in one."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from agentd.calls import eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


async def _at_once() -> int:
    VAR.set("callee")
    return 7


async def _fails() -> int:
    raise ValueError("bad")


async def _waits(gate: asyncio.Event, log: list[str]) -> str:
    log.append("started")
    try:
        await gate.wait()
        log.append("resumed")
        await asyncio.sleep(0)
        return VAR.get()
    finally:
        log.append("finally")


async def test_a_coroutine_that_never_waits_is_done_at_once() -> None:
    done = eager.start(_at_once())
    assert done.done() and not isinstance(done, asyncio.Task)
    assert await done == 7
    assert VAR.get() == "caller", "the first step ran in a copy of the caller's context"


async def test_an_exception_in_the_first_step_is_the_futures() -> None:
    failed = eager.start(_fails())
    assert failed.done()
    with pytest.raises(ValueError, match="bad"):
        await failed


async def test_a_coroutine_that_waits_carries_on_in_a_task() -> None:
    gate, log = asyncio.Event(), []
    VAR.set("set before")
    task = eager.start(_waits(gate, log))
    assert log == ["started"], "the first step ran in place, before any turn of the loop"
    assert isinstance(task, asyncio.Task) and not task.done()
    gate.set()
    assert await task == "set before"
    assert log == ["started", "resumed", "finally"]


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    gate, log = asyncio.Event(), []
    task = eager.start(_waits(gate, log))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["started", "finally"]


async def test_a_shielded_task_outlives_its_cancelled_waiter() -> None:
    gate, log = asyncio.Event(), []
    task = eager.start(_waits(gate, log))
    waiter = asyncio.ensure_future(asyncio.shield(task))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    assert await task == "caller"
