"""Bash: one command in the session's sandbox, output live, cwd carried between calls.

The tool's own semantics: its schema, what the model reads, its timeout and what a
timeout does, the result's text. Running the command and knowing what it did (changes,
network, cwd, files read, the task) is agentd/runs/command.py's."""

from __future__ import annotations

import re
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.bashsec import classify
from agentd.foundation.errors import InputError, ToolError
from agentd.runs.command import CommandRequest
from agentd.runs.output.file import head_and_tail
from agentd.runs.output.registry import sandbox_path
from agentd.runs.run import Output
from agentd.runs.tasks import Task
from agentd.sandboxing.mode import SandboxMode
from agentd.tools.base import Hints, Tool, ToolContext, ToolResult
from agentd.tools.bash import result as bash_result
from agentd.tools.bash.result import MAX_OUTPUT_CHARS

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000

DESCRIPTION = """\
Runs a bash command in the session's sandbox and returns its output (stdout and \
stderr interleaved as written).

- The working directory carries over between calls while it stays inside the \
workspace; a cd outside is undone. Shell variables and exports do not carry over.
- Only the workspace and a per-session temp dir ($TMPDIR) are writable; the \
network is off unless the session allows it.
- A command that runs without anyone's approval because it only reads runs with \
the workspace read-only and no network. If it turns out to need to write, ask the \
user to allow it rather than retrying.
- dangerouslyDisableSandbox: true runs the command outside the sandbox, only in a \
session that allows it and only after the user approves that call.
- timeout is in milliseconds (default 120000, at most 600000). A command still \
running at its timeout moves to the background: read its output file with Read, \
stop it with TaskStop.
- run_in_background: true returns at once with a task id and an output file; you \
are told when it ends.
- Output over 30000 characters is saved to a file you can Read, and a 2KB preview \
is shown (a failed command's head and tail).
- Prefer the Read, Edit, Write, Glob and Grep tools to cat, sed, echo > and find \
for files: they are faster and keep edits safe."""

_BARE_SLEEP = re.compile(r"\s*sleep\s+[0-9.]+[smhd]?\s*")


class BashInput(TypedDict):
    command: str
    timeout: NotRequired[float]
    description: NotRequired[str]
    run_in_background: NotRequired[bool]
    dangerouslyDisableSandbox: NotRequired[bool]


class BashTool(Tool[BashInput]):
    name = "Bash"
    # Runs anything; the network too in a session that allows it.
    hints = Hints(open_world=True)
    description = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number"},
            "description": {"type": "string"},
            "run_in_background": {"type": "boolean"},
            "dangerouslyDisableSandbox": {"type": "boolean"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    # Bash cuts its own output to head and tail, with the full text in a file.
    max_result_chars = 10 * MAX_OUTPUT_CHARS

    async def validate_input(self, args: BashInput, ctx: ToolContext) -> None:
        # An empty command runs (and prints nothing), as in the reference.
        if "\0" in args["command"]:
            raise InputError("The command contains a NUL byte.")
        if args.get("dangerouslyDisableSandbox") and not ctx.session.allow_unsandboxed:
            raise InputError(
                "This session does not allow commands outside the sandbox; run the command "
                "sandboxed (drop dangerouslyDisableSandbox), or create a session whose policy "
                "allows unsandboxed commands."
            )

    async def call(self, args: BashInput, ctx: ToolContext) -> ToolResult:
        command: str = args["command"]
        mode = ctx.sandbox
        reviewed = ctx.session.review and mode is not SandboxMode.READ_ONLY
        if reviewed and classify(command).read_only:
            # Review mode: what the classifier reads as read-only runs on the workspace
            # itself, read-only; everything else on a view whose changes wait.
            mode, reviewed = SandboxMode.READ_ONLY, False
        if reviewed:
            _check_review(args, ctx)
        run = await ctx.services.commands.start(
            CommandRequest(
                session=ctx.session,
                command=command,
                tool_use_id=ctx.tool_use_id,
                mode=mode,
                identity=ctx.fs_identity(),
                description=args.get("description", ""),
                interactive=ctx.interactive,
            )
        )
        if args.get("run_in_background"):
            run.to_background()
            return _background_result(run.task)
        timeout_ms = effective_timeout_ms(args.get("timeout"))
        outcome = await run.follow(timeout_ms / 1000, ctx.cancelled, ctx.progress)
        if outcome == "timeout" and not reviewed and not _BARE_SLEEP.fullmatch(command):
            run.to_background()
            return _moved_to_background(run.task, run.output, timeout_ms, run.notices)
        finished = await run.finish(outcome, ctx.cancelled)
        read_only = mode is SandboxMode.READ_ONLY
        seen_at = sandbox_path(run.task.id)
        return bash_result.finished(
            command,
            finished.code,
            outcome,
            finished.output,
            finished.notices,
            seen_at,
            timeout_ms,
            read_only,
        )


def _check_review(args: BashInput, ctx: ToolContext) -> None:
    """Review mode's rules for a writing command (agentd/changes/review.py): one change
    set waits at a time, and it runs in the foreground (its view lives as long as it)."""
    if args.get("run_in_background"):
        raise ToolError(
            "This session is in review mode: a command that writes cannot run in the "
            "background. Run it in the foreground (its changes then wait for review)."
        )
    reviews = ctx.services.commands.changes.reviews
    if reviews is not None and reviews.pending(ctx.session.id) is not None:
        raise ToolError(
            "This session is in review mode and an earlier command's changes still wait "
            "for a person's review; writing commands are refused until they are applied "
            "or discarded. Ask the user to review them (agentctl review SESSION)."
        )


def _background_result(task: Task) -> ToolResult:
    result = ToolResult.text(
        f"Command running in background with ID: {task.id}. Output is being written "
        f"to: {task.output_path} (in Bash commands: {sandbox_path(task.id)}). You will be "
        "told when it finishes. Read that file (or `tail` it in Bash) to see its output so "
        "far, or use BashOutput; stop it with TaskStop.",
        data={
            "stdout": "",
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": task.id,
        },
    )
    result.task = task
    return result


def _moved_to_background(
    task: Task, output: Output, timeout_ms: float, notices: list[str]
) -> ToolResult:
    """Its output so far, where it goes on, and the notices of its time in the foreground
    (the hosts its proxy refused)."""
    shown, _ = head_and_tail(output, MAX_OUTPUT_CHARS)
    seconds = f"{timeout_ms / 1000:g}s"
    text = (f"{shown.rstrip(chr(10))}\n" if shown.strip() else "") + (
        f"Command did not finish within its {seconds} timeout and was moved to the "
        f"background (ID: {task.id}). Output is being written to: {output.path} "
        f"(in Bash commands: {sandbox_path(task.id)}). You will be told when it finishes. "
        "It is still running: do not start it again. Stop it with TaskStop if it is no "
        "longer needed; Read that file to see its output so far."
    )
    text = "\n".join([text, *notices])
    result = ToolResult.text(
        text,
        data={
            "stdout": shown,
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": task.id,
            "timedOutAfterMs": timeout_ms,
        },
    )
    result.task = task
    return result


def effective_timeout_ms(timeout: float | None) -> float:
    """The reference's leniency: no timeout, 0 or less is the default, above the most is
    the most."""
    if timeout is None or timeout <= 0:
        return DEFAULT_TIMEOUT_MS
    return min(timeout, MAX_TIMEOUT_MS)


TOOL = BashTool
