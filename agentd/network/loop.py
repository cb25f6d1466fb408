"""The proxies' own event loop, in a thread of its own: bulk traffic (a 1 GiB download,
200 tunnels at once) never delays the daemon's loop, where the API, asks and journal
live. uvloop when it is installed (its transports are C: several times asyncio's
throughput per core), asyncio's otherwise. Decisions hop to the daemon's loop
(service.py); bytes never do."""

from __future__ import annotations

import asyncio
import concurrent.futures
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


class ProxyLoop:
    def __init__(self) -> None:
        self.loop = _new_loop()
        self._thread = threading.Thread(target=self._run, name="agentd-proxy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        """Every connection dropped, the loop ended and closed."""

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.submit(shutdown()).result(10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("the proxy's connections did not all end in time")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()
