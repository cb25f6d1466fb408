"""CPU-heavy work off the event loop, in worker processes, taken fairly between sessions.

A thread would not do: the work is Python, and a thread holding the GIL makes every
turn of the event loop wait for it (each turn gives the GIL up and waits up to the
switch interval to get it back), so one session's large Write would still slow every
other session's calls. Worker processes run on the other cores instead.

Fairness: each key (a session) has its own queue, and the workers take the queues in
turn, so a session that sends many heavy calls waits behind its own, while another
session's one heavy call waits for at most one job of each other session.

Workers run at a lower CPU priority than the daemon (nice WORKER_NICE, SCHED_BATCH): on
a machine with fewer free cores than runnable processes, the event loop's short turns
(every session's calls) win a core over a long patch, which only its own session waits
for. The patch's CPU deadline counts CPU time, so its result is the same either way.

Workers start with the first job (most daemons never need one; it costs the first
heavy call ~0.2 s, off the loop) and end with the daemon, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from agentd_sandbox import linux

log = logging.getLogger(__name__)

T = TypeVar("T")


# Processes at most: the machine's cores less the one the event loop runs on.
WORKERS = max(1, min(4, (os.cpu_count() or 2) - 1))
# How much lower than the daemon's a worker's priority is (a CPU share ~1/10 of it).
WORKER_NICE = 10


def _ready() -> bool:
    return True


def _start_worker(parent: int) -> None:
    """In a worker, first: end when the daemon ends, however it ends (a kill -9
    included: nothing else would end the workers and their resource tracker); then yield
    the CPU to the loop."""
    linux.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above
        os._exit(0)
    os.nice(WORKER_NICE)
    with contextlib.suppress(OSError):  # a kernel without it: nice alone
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


class Offload:
    """Runs `fn(*args)` in a worker process; queues per key, taken round-robin."""

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._queues: OrderedDict[
            str, deque[tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]]
        ] = OrderedDict()
        self._busy = 0

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fork of this process would copy gRPC's threads and their locks.
            self._pool = ProcessPoolExecutor(
                self._workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
        return self._pool

    def warm(self) -> None:
        """Start the workers now, so the first heavy call does not pay for it."""
        pool = self._executor()
        for _ in range(self._workers):
            pool.submit(_ready)

    async def run(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queues.setdefault(key, deque()).append((fut, fn, args))
        self._dispatch()
        return await fut

    def _dispatch(self) -> None:
        while self._busy < self._workers and self._queues:
            key, queue = next(iter(self._queues.items()))
            fut, fn, args = queue.popleft()
            # The key goes to the back of the line: the next job is another key's.
            del self._queues[key]
            if queue:
                self._queues[key] = queue
            if fut.cancelled():
                continue
            self._busy += 1
            self._submit(fut, fn, args)

    def _submit(
        self, fut: asyncio.Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        try:
            job = asyncio.wrap_future(self._executor().submit(fn, *args))
        except (BrokenProcessPool, RuntimeError) as exc:
            self._restart(exc)
            job = asyncio.wrap_future(self._executor().submit(fn, *args))

        def done(job: asyncio.Future[Any]) -> None:
            self._busy -= 1
            if not fut.done():
                if job.cancelled():
                    fut.cancel()
                elif (exc := job.exception()) is not None:
                    if isinstance(exc, BrokenProcessPool):
                        self._restart(exc)
                    fut.set_exception(exc)
                else:
                    fut.set_result(job.result())
            self._dispatch()

        job.add_done_callback(done)

    def _restart(self, exc: BaseException) -> None:
        """A worker died (killed, out of memory): the next job gets a new pool."""
        log.warning("a worker process of agentd ended (%s); starting new ones", exc)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None

    def close(self) -> None:
        for queue in self._queues.values():
            for fut, _, _ in queue:
                fut.cancel()
        self._queues.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
