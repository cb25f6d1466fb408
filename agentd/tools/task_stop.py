"""TaskStop (alias KillShell): stop a background task of this session."""

from __future__ import annotations

import json
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.foundation.errors import InputError
from agentd.tools.base import Hints, Tool, ToolContext, ToolResult

DESCRIPTION = """\
Stops a background task (a background Bash command, or one moved to the background \
at its timeout) and everything it started. Give its id as task_id. The task's output \
file stays readable and ends with its exit code."""


class TaskStopInput(TypedDict):
    task_id: NotRequired[str]
    shell_id: NotRequired[str]  # the older name


class TaskStopTool(Tool[TaskStopInput]):
    name = "TaskStop"
    hints = Hints(idempotent=True)  # kills; a stopped task stays stopped
    aliases = ("KillShell",)
    description = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"task_id": {"type": "string"}, "shell_id": {"type": "string"}},
        "additionalProperties": False,
    }

    async def validate_input(self, args: TaskStopInput, ctx: ToolContext) -> None:
        if not (args.get("task_id") or args.get("shell_id")):
            raise InputError("Give the id of the task to stop as task_id.")

    async def call(self, args: TaskStopInput, ctx: ToolContext) -> ToolResult:
        tasks = ctx.services.tasks
        task_id = args.get("task_id") or args["shell_id"]
        task = tasks.get(ctx.session.id, task_id)
        if task is None or not tasks.is_running(task_id):
            # As the reference answers: a stopped or finished task is no longer found.
            raise InputError(f"No task found with ID: {task_id}")
        await tasks.stop(task)
        data = {
            "message": f"Successfully stopped task: {task.id} ({task.command})",
            "task_id": task.id,
            "task_type": "local_bash",
            "command": task.command,
        }
        return ToolResult.text(json.dumps(data, separators=(",", ":")), data=data)


TOOL = TaskStopTool
