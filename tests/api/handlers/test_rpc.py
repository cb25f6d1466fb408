"""agentd/api/handlers/rpc.py: the state database failing under an RPC (a damaged page,
a file gone, an I/O error) ends it FAILED_PRECONDITION with a sentence, never INTERNAL,
for unary and streaming handlers alike."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from agentd.api.handlers.rpc import stream, unary


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise _Aborted


class _Handlers:
    @unary
    async def Get(self, request: Any, context: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    @stream
    async def Follow(self, request: Any, context: Any) -> AsyncIterator[int]:
        yield 1
        raise sqlite3.OperationalError("disk I/O error")


async def test_a_failing_database_ends_a_unary_rpc_with_a_sentence() -> None:
    context = _Context()
    with pytest.raises(_Aborted):
        await _Handlers().Get(None, context)
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "malformed" in context.details and "restore it from a backup" in context.details


async def test_a_failing_database_ends_a_stream_with_a_sentence() -> None:
    context = _Context()
    got = []
    with pytest.raises(_Aborted):
        async for item in _Handlers().Follow(None, context):
            got.append(item)
    assert got == [1]
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "disk I/O error" in context.details
