"""TodoWrite: replace the session's todo list, and tell attached clients."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, TypedDict

from agentd.sessions.event_types import TodoPayload
from agentd.tools.base import Hints, InputError, Tool, ToolContext, ToolResult

STATUSES = ("pending", "in_progress", "completed")
FIELDS = ("content", "status", "activeForm")

DESCRIPTION = """\
Keep a todo list for the current task, visible to the user: write the whole list each
time (it replaces the previous one).

Use it for work with several steps: add the steps as `pending`, mark one `in_progress`
before starting it, and mark it `completed` as soon as it is done, not in batches. Each
item has `content` (imperative: "Run the tests"), `activeForm` (what is being done:
"Running the tests") and `status` (pending, in_progress or completed). Skip it for a
single trivial step. When every item is completed the list is cleared."""

RESULT_TEXT = (
    "The todo list is updated. Keep it current as you work, and go on with the "
    "tasks in progress, if any."
)


class TodoWriteInput(TypedDict):
    todos: list[TodoPayload]


class TodoWrite(Tool[TodoWriteInput]):
    name: ClassVar[str] = "TodoWrite"
    # Replaces the session's own list; touches no file.
    hints = Hints(destructive=False, idempotent=True)
    description: ClassVar[str] = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "activeForm": {"type": "string", "minLength": 1},
                    },
                    "required": list(FIELDS),
                    "additionalProperties": False,
                },
            }
        },
        "required": ["todos"],
        "additionalProperties": False,
    }

    def lenient_input(self, args: dict[str, Any]) -> dict[str, Any]:
        """Item fields the schema does not name are dropped, as the reference drops them:
        models trained on the older schema still send `id` and `priority`."""
        todos = args.get("todos")
        if not isinstance(todos, list):
            return args
        kept = [
            {k: v for k, v in item.items() if k in FIELDS} if isinstance(item, dict) else item
            for item in todos
        ]
        return {**args, "todos": kept}

    # Touches no file, but changes session state: calls must not interleave.
    def is_read_only(self, args: TodoWriteInput) -> bool:
        return False

    def is_concurrency_safe(self, args: TodoWriteInput) -> bool:
        return False

    async def validate_input(self, args: TodoWriteInput, ctx: ToolContext) -> None:
        todos = args.get("todos")
        if not isinstance(todos, list):
            raise InputError("todos must be a list of todo items.")
        problems: list[str] = []
        for i, item in enumerate(todos):
            where = f"todos[{i}]"
            if not isinstance(item, dict):
                problems.append(f"{where} must be an object with content, status, activeForm")
                continue
            for key in ("content", "activeForm"):
                value = item.get(key)
                if not isinstance(value, str) or not value.strip():
                    problems.append(f"{where}.{key} must be a non-empty string")
            if item.get("status") not in STATUSES:
                problems.append(
                    f"{where}.status must be one of {', '.join(STATUSES)}; "
                    f"got {item.get('status')!r}"
                )
        if problems:
            raise InputError("Invalid todo list: " + "; ".join(problems) + ".")

    async def call(self, args: TodoWriteInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        old = session.todos
        new = [
            TodoPayload(content=t["content"], status=t["status"], activeForm=t["activeForm"])
            for t in args["todos"]
        ]
        # A finished list is cleared, as the reference does: the next task starts empty.
        stored = [] if new and all(t["status"] == "completed" for t in new) else new
        session.todos = stored
        await ctx.services.on_todos_changed(session, copy.deepcopy(stored))
        return ToolResult.text(RESULT_TEXT, {"oldTodos": old, "newTodos": new})


TOOL = TodoWrite
