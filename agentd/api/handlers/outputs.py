"""Background tasks and command output: listing a session's tasks, reading an output."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentd.api.handlers.rpc import require, stream, unary
from agentd.api.wire import task_to_pb
from agentd.runs.output.registry import Outputs
from agentd.runs.output.serving import EncodedChunks
from agentd.runs.tasks import TaskManager
from agentd.sessions.session import SessionManager
from agentd_client.v1 import agentd_pb2 as pb


class OutputHandlers:
    def __init__(self, sessions: SessionManager, tasks: TaskManager, outputs: Outputs) -> None:
        self.sessions = sessions
        self.tasks = tasks
        self.outputs = outputs
        self._encoded_chunks = EncodedChunks()

    @unary
    async def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksResponse:
        self.sessions.get(require(request.session_id, "session_id"))
        found = self.tasks.list(request.session_id, request.include_finished)
        return pb.ListTasksResponse(tasks=[task_to_pb(t) for t in found])

    @stream
    async def ReadOutput(self, request: pb.ReadOutputRequest, context: Any) -> AsyncIterator[bytes]:
        """Each chunk is encoded once for all its followers and sent as those bytes
        (agentd/api/decoding.py sends bytes as they are)."""
        self.sessions.get(require(request.session_id, "session_id"))
        async for chunk in self.outputs.read(
            request.session_id, require(request.id, "id"), request.offset, request.follow
        ):
            yield self._encoded_chunks.get(request.session_id, chunk)
