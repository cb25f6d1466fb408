"""Start a coroutine at once, and give it a Task of its own only if it has to wait.

A tool call runs in a Task of its own, so that the client that asked can go away without
cancelling it. Creating that Task and waiting on it cost three turns of the event loop
(the Task's first step is scheduled, its end is a callback, the shield's outer future is
another), and each turn of the daemon's loop costs a poll and a wakeup of gRPC's poller
thread: ~0.1 ms of a 1 ms small-file Read. Most such calls (a small Read, a denied call,
a bad input) finish without ever waiting, so their first step is run here, in place; a
call that does wait carries on in a Task from where it stopped, as if it had one from
the start (Python 3.12's eager tasks, which 3.11 lacks).

The first step runs in a copy of the caller's context variables, as a Task's would.
Nothing can cancel it: until it waits, nothing else runs.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _Resume:
    """Awaitable that carries on a coroutine whose first step yielded `pending`."""

    __slots__ = ("_coro", "_pending")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self._coro, self._pending
        self._pending = None
        while True:
            try:
                value = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancel or any throw: to the coroutine
                try:
                    pending = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = coro.send(value)
                except StopIteration as done:
                    return done.value


async def _carry_on(resume: _Resume) -> Any:
    return await resume


def start(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """`coro` run up to its first wait: a done future if it finished (or raised) without
    one, else the Task carrying it on."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        pending = context.run(coro.send, None)
    except StopIteration as done:
        finished: asyncio.Future[T] = loop.create_future()
        finished.set_result(done.value)
        return finished
    except Exception as exc:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_carry_on(_Resume(coro, pending)), context=context)
