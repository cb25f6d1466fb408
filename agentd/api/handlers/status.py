"""The daemon itself: its status, its tools, the classifier."""

from __future__ import annotations

import os
import time
from typing import Any

from agentd import __version__
from agentd.api.handlers.rpc import unary
from agentd.bashsec import classify
from agentd.calls.executor import Executor
from agentd.foundation import metrics
from agentd.permissions import Asker
from agentd.sessions.retention import Reaper
from agentd.sessions.session import SessionManager
from agentd.tools.services import Services
from agentd_client.core import structs
from agentd_client.v1 import agentd_pb2 as pb


class StatusHandlers:
    def __init__(
        self,
        sessions: SessionManager,
        executor: Executor,
        services: Services,
        asker: Asker,
        reaper: Reaper,
        sandbox_report: dict[str, Any],
    ) -> None:
        self.sessions = sessions
        self.executor = executor
        self.services = services
        self.asker = asker
        self.reaper = reaper
        self.sandbox_report = sandbox_report
        self.started = time.monotonic()

    @unary
    async def GetStatus(self, request: pb.GetStatusRequest, context: Any) -> pb.Status:
        config = self.services.config
        return pb.Status(
            version=__version__,
            pid=os.getpid(),
            uptime_seconds=time.monotonic() - self.started,
            open_sessions=len(self.sessions.list()),
            running_calls=self.executor.running_count,
            running_tasks=self.services.tasks.running_count(),
            socket_path=config.socket_path,
            state_dir=config.state_dir,
            sandbox=structs.to_struct(self.sandbox_report),
            calls_served=metrics.calls_served(),
            pending_asks=self.asker.pending_count,
            state=pb.StateUsage(**self.reaper.usage()),
            tasks_readopted=metrics.tasks_readopted(),
        )

    @unary
    async def ListTools(self, request: pb.ListToolsRequest, context: Any) -> pb.ListToolsResponse:
        return pb.ListToolsResponse(
            tools=[
                pb.ToolSpec(
                    name=t.name,
                    description=t.description,
                    input_schema=structs.to_struct(t.input_schema),
                    hints=pb.ToolHints(
                        read_only=t.hints.read_only,
                        destructive=t.hints.destructive,
                        idempotent=t.hints.idempotent,
                        open_world=t.hints.open_world,
                    ),
                )
                for t in self.executor.registry.tools
            ]
        )

    @unary
    async def Classify(self, request: pb.ClassifyRequest, context: Any) -> pb.ClassifyResponse:
        result = classify(request.command).to_dict()
        return pb.ClassifyResponse(classification=structs.to_struct(result))
