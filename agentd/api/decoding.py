"""Requests that cannot be decoded: INVALID_ARGUMENT and one log line, not a traceback.

grpc decodes a request before any handler of ours runs, and a decoding failure there is
logged with a full traceback and answered UNKNOWN, for every such request (57 MB of log
for 78k of them). This interceptor gives every method a decoder that never raises:
bytes that do not parse become an `Undecodable` value, which the method's wrapper turns
into INVALID_ARGUMENT. The log gets one line for it, at most one every few seconds with
a count of the others, so a flood of garbage cannot fill the disk.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0


@dataclass(frozen=True, slots=True)
class Undecodable:
    method: str
    error: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request decoded but refused before its handler (an ambiguous session name:
    names.py), answered with this status and message."""

    status: grpc.StatusCode
    message: str


class RateLimitedLog:
    """One warning now, then at most one per `every` seconds, counting those left out."""

    def __init__(self, every: float = LOG_EVERY_S) -> None:
        self.every = every
        self._last = -float("inf")
        self._left_out = 0

    def warning(self, message: str) -> bool:
        now = time.monotonic()
        if now - self._last < self.every:
            self._left_out += 1
            return False
        if self._left_out:
            message += f" ({self._left_out} more since the last such line)"
        self._last, self._left_out = now, 0
        log.warning("%s", message)
        return True


_log = RateLimitedLog()


async def _refuse(context: grpc.aio.ServicerContext, bad: Undecodable | Refusal) -> None:
    if isinstance(bad, Refusal):
        await context.abort(bad.status, bad.message)
    _log.warning(f"undecodable request to {bad.method}: {bad.error}")
    await context.abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"the request to {bad.method} could not be decoded: {bad.error}",
    )


async def _checked(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, Undecodable | Refusal):
            await _refuse(context, request)
        yield request


def _guard(behavior: Callable[..., Any], streaming_request: bool) -> Callable[..., Any]:
    """`behavior` with its request checked first; same shape (coroutine or generator)."""

    async def first(request: Any, context: Any) -> Any:
        if streaming_request:
            return _checked(request, context)
        if isinstance(request, Undecodable | Refusal):
            await _refuse(context, request)
        return request

    if inspect.isasyncgenfunction(behavior):

        async def generator(request: Any, context: Any) -> AsyncIterator[Any]:
            async for item in behavior(await first(request, context), context):
                yield item

        return generator

    async def coroutine(request: Any, context: Any) -> Any:
        return await behavior(await first(request, context), context)

    return coroutine


class DecodeGuard(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(details)
        decode = getattr(handler, "request_deserializer", None)
        if handler is None or decode is None or not hasattr(handler, "_replace"):
            return handler
        method = details.method

        def safe_decode(raw: bytes) -> Any:
            try:
                return decode(raw)
            except Exception as exc:  # a DecodeError, or anything a decoder raises
                return Undecodable(method, str(exc) or type(exc).__name__)

        kind = (
            f"{'stream' if handler.request_streaming else 'unary'}_"
            f"{'stream' if handler.response_streaming else 'unary'}"
        )
        behavior = getattr(handler, kind)
        encode = handler.response_serializer
        return handler._replace(
            request_deserializer=safe_decode,
            response_serializer=encode and _encoded_or(encode),
            **{kind: _guard(behavior, handler.request_streaming)},
        )


def _encoded_or(encode: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A response already encoded (bytes) goes as it is: ReadOutput encodes a chunk once
    for all its followers instead of once each, and a tool's result is sent with data
    encoded in a worker process (wire.result_bytes)."""

    def encoded_or(response: Any) -> bytes:
        return response if type(response) is bytes else encode(response)

    return encoded_or
