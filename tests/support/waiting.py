"""Waiting on what the daemon tells, not on the clock."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from agentd_client import Client, Event


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
