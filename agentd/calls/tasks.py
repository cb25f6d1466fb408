"""Tasks a person starts (StartTask, `agentctl exec`): a Bash call in the background.

The call goes the way every Bash call goes (agentd/calls/executor.py: journaled,
classified, permission-checked, sandboxed), with the person's terminal or stdin in its
ToolContext (the model's Bash schema has no such field), and what comes back is the
task it started, or why it did not start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentd.calls.executor import Executor, ToolUse, Update, new_tool_use_id
from agentd.foundation.errors import InvalidRequest
from agentd.runs.launch import Interactive
from agentd.runs.tasks import Task
from agentd.sessions.session import Session

_TOOL_USE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_COMMAND = 100_000
MAX_DESCRIPTION = 1_000


class TaskNotStarted(Exception):
    """The Bash call behind a task failed: denied, or its sandbox could not start. The
    message is the call's result, which says why."""


@dataclass(frozen=True, slots=True)
class TaskRequest:
    command: str
    description: str = ""
    # "": a new one is made.
    tool_use_id: str = ""
    interactive: Interactive | None = None

    def check(self) -> None:
        """Raises InvalidRequest for a request no call could be made of."""
        if not self.command:
            raise InvalidRequest("command is required")
        if len(self.command) > MAX_COMMAND or len(self.description) > MAX_DESCRIPTION:
            raise InvalidRequest(
                f"command (at most {MAX_COMMAND}) or description (at most {MAX_DESCRIPTION}) "
                "is too long"
            )
        if self.tool_use_id and not _TOOL_USE_ID.fullmatch(self.tool_use_id):
            raise InvalidRequest("tool_use_id: 1 to 64 letters, digits, _ or -")


async def _no_updates(update: Update) -> None:
    """A task's start answers once; the session's attached clients see the call's progress."""


class TaskStarter:
    """Starts a person's task through the executor, as a Bash call in the background."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def start(self, session: Session, request: TaskRequest) -> Task:
        """The task started; raises TaskNotStarted saying why it did not."""
        request.check()
        call = ToolUse(
            request.tool_use_id or new_tool_use_id(),
            "Bash",
            {
                "command": request.command,
                "description": request.description,
                "run_in_background": True,
            },
        )
        result = await self.executor.run_one(
            session, call, _no_updates, interactive=request.interactive
        )
        if result.is_error or result.task is None:
            raise TaskNotStarted(" ".join(result.text_content().split())[:2000])
        return result.task
