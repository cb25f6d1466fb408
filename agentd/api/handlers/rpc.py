"""What every handler shares: errors mapped to a status, required fields, the caller.

AgentdError ends the RPC with its status (agentd/foundation/errors.py); the state
database failing under a read or a write (damaged, gone, an I/O error) ends it
FAILED_PRECONDITION with a sentence; anything else is a bug, logged, and answered
INTERNAL, so one bad request never takes the daemon down.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from agentd.api.errors import status_of
from agentd.foundation.errors import AgentdError, InvalidRequest, bounded
from agentd.sessions import store_faults

log = logging.getLogger(__name__)


def unary(method: Callable[..., Any]) -> Callable[..., Any]:
    """A unary handler, its errors answered as statuses."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except AgentdError as exc:
            await context.abort(status_of(exc), bounded(str(exc)))
        except sqlite3.DatabaseError as exc:
            await _state_failed(method.__name__, exc, context)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the daemon's log")

    return wrapper


def stream(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """A server-streaming handler, its errors answered as statuses."""

    @functools.wraps(method)
    async def wrapper(
        self: Any, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        try:
            async for item in method(self, request, context):
                yield item
        except AgentdError as exc:
            await context.abort(status_of(exc), bounded(str(exc)))
        except sqlite3.DatabaseError as exc:
            await _state_failed(method.__name__, exc, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the daemon's log")

    return wrapper


async def _state_failed(
    name: str, exc: sqlite3.DatabaseError, context: grpc.aio.ServicerContext
) -> None:
    """The state database failed under an RPC: one log line, and a sentence for the
    caller, never INTERNAL."""
    message = store_faults.failed_while_running(exc)
    log.error("%s: %s", name, message)
    await context.abort(grpc.StatusCode.FAILED_PRECONDITION, bounded(message))


def require(value: str, what: str) -> str:
    if not value:
        raise InvalidRequest(f"{what} is required")
    return value


_IDENTITY = re.compile(r"agentd-client \(([^()]{1,300})\)")


def client_identity(context: Any) -> str:
    """Who a client says it is (user@host on terminal, sent as its user agent when it
    connects), for the record of what a person decided; else its transport peer."""
    for key, value in context.invocation_metadata() or ():
        if key == "user-agent" and (m := _IDENTITY.search(value)):
            fields = dict(
                part.strip().partition("=")[::2] for part in m.group(1).split(";") if "=" in part
            )
            who = f"{fields.get('user') or '?'}@{fields.get('host') or '?'}"
            if tty := fields.get("tty"):
                who += f" on {tty}"
            return who
    return f"person via {context.peer()}"
