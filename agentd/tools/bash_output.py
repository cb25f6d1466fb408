"""BashOutput: what a background task printed since the last look, and whether it ended."""

from __future__ import annotations

import os
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.foundation.errors import InputError
from agentd.tools.base import Hints, ReadOnlyTool, ToolContext, ToolResult
from agentd.tools.search.patterns import compile_pattern, matching_lines

DESCRIPTION = """\
Returns the output a background task printed since the last BashOutput call for it \
(stdout and stderr interleaved), with its status and, once it ended, its exit code. \
filter keeps only the lines matching a regular expression (the other new lines are \
consumed all the same)."""

# At most this much new output per call; the rest is left for the next call.
MAX_BYTES = 30_000


class BashOutputInput(TypedDict):
    bash_id: str
    filter: NotRequired[str]


class BashOutputTool(ReadOnlyTool[BashOutputInput]):
    name = "BashOutput"
    # Each call returns what is new since the last: not idempotent.
    hints = Hints(read_only=True, destructive=False)
    description = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"bash_id": {"type": "string"}, "filter": {"type": "string"}},
        "required": ["bash_id"],
        "additionalProperties": False,
    }

    async def validate_input(self, args: BashOutputInput, ctx: ToolContext) -> None:
        if args.get("filter"):
            compile_pattern(args["filter"], "filter")

    async def call(self, args: BashOutputInput, ctx: ToolContext) -> ToolResult:
        tasks = ctx.services.tasks
        task = tasks.get(ctx.session.id, args["bash_id"])
        if task is None:
            raise InputError(f"No task found with ID: {args['bash_id']}")
        try:
            with open(task.output_path, "rb") as f:
                f.seek(task.read_offset)
                data = f.read(MAX_BYTES)
        except FileNotFoundError:
            data = b""
        # Stop at the last full line unless the task has ended.
        running = tasks.is_running(task.id)
        if running and b"\n" in data and not data.endswith(b"\n"):
            data = data[: data.rindex(b"\n") + 1]
        text = data.decode(errors="replace")
        if args.get("filter"):
            # Filtered before the output counts as read: a filter that fails loses nothing.
            pattern = compile_pattern(args["filter"], "filter")
            text = await matching_lines(pattern, text, "filter")
        task.read_offset += len(data)
        more = os.path.getsize(task.output_path) > task.read_offset if data else False
        status = "running" if running else task.status
        parts = [f"<status>{status}</status>"]
        if task.exit_code is not None and not running:
            parts.append(f"<exit_code>{task.exit_code}</exit_code>")
        parts.append(
            f"<output>\n{text.rstrip(chr(10))}\n</output>" if text else "<output></output>"
        )
        if more:
            parts.append("<note>More output is waiting: call BashOutput again.</note>")
        return ToolResult.text(
            "\n\n".join(parts),
            data={
                "status": status,
                "exitCode": task.exit_code,
                "output": text,
                "taskId": task.id,
                "more": more,
            },
        )


TOOL = BashOutputTool
