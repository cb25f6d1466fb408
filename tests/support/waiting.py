"""Waiting on what says a thing happened, never on the clock.

Wait on the event itself where there is one: a session event (`wait_for_event`), a
daemon's log line (`DaemonProcess.wait_for_log`), output on a pty (`OnPty.read_until`),
a callback or an asyncio.Event in a unit test. `wait_until` is for a state nothing
announces: a process gone from /proc, a file another process writes, a task's status.
A `sleep` in a test is never the way to wait: on a busy machine it is too short, and
everywhere else it is too long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from agentd_client import Client, Event

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10,
    what: str | Callable[[], str] = "",
    interval: float = 0.02,
) -> T:
    """Ask `predicate` until it answers something true, and return that answer.

    TimeoutError when `timeout` seconds pass first, saying `what` (a function is asked
    then: what a daemon logged, which processes are left) and the last answer.
    `interval`: the pause between two asks (0 for a state that lasts only an instant).
    """
    deadline = time.monotonic() + timeout
    while True:
        answer = predicate()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what or repr(predicate)
            raise TimeoutError(f"not within {timeout:g}s: {said} (last: {answer!r})")
        time.sleep(interval)


def wait_for_event(
    client: Client,
    session_id: str,
    predicate: Callable[[Event], bool],
    after_seq: int = 0,
    timeout: float = 30,
) -> Event:
    """The first event of the session (replayed or live) that satisfies `predicate`."""
    stream = client.attach(session_id, after_seq)
    timer = threading.Timer(timeout, stream.cancel)
    timer.start()
    try:
        for event in stream:
            if predicate(event):
                return event
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.CANCELLED:
            raise
    finally:
        timer.cancel()
        stream.cancel()
    raise TimeoutError(f"no matching event in {timeout}s")


def task_finished(task_id: str) -> Callable[[Event], bool]:
    return lambda e: e.HasField("task_finished") and e.task_finished.task.id == task_id
