"""A service's own event loop, in a thread of its own: the proxies and the ssh-agent serve
sandboxes there, so bulk traffic (a 1 GiB download, 200 tunnels at once) or a flood of
connections never delays the daemon's loop, where the API, asks and journal live.
uvloop when it is installed (its transports are C: several times asyncio's throughput
per core), asyncio's otherwise. Decisions hop to the daemon's loop (`on_daemon`); bytes
never do."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class ServiceLoop:
    """A loop running in its own thread from construction until `stop`; `daemon` is the
    daemon's loop, where the service's decisions are made."""

    def __init__(self, name: str, daemon: asyncio.AbstractEventLoop) -> None:
        self.name = name
        self.daemon = daemon
        self.loop = _new_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on this loop (from any thread); connections made to a listener
        before it is served wait in the listen backlog."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """`fn(*args)` on this loop, soon (from any thread): closing a server it holds."""
        self.loop.call_soon_threadsafe(fn, *args)

    async def on_daemon(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro` run on the daemon's loop (rules, asks, the journal), awaited from this one."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.daemon))

    def to_daemon(self, fn: Callable[..., Any], *args: Any) -> None:
        """`fn(*args)` on the daemon's loop, soon, not awaited (a record of what happened);
        nothing once that loop is closed (the daemon is stopping)."""
        with contextlib.suppress(RuntimeError):
            self.daemon.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        """Every connection dropped, the loop ended and closed."""

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_closed():
            return
        try:
            self.submit(shutdown()).result(10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("%s: its connections did not all end in time", self.name)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()
