"""What a finished Bash command answers: its output as the reference shows it (or a
persisted preview), what its exit status means, and the notices."""

from __future__ import annotations

import os
import re
import shlex

from agentd.runs.output.file import head_and_tail
from agentd.runs.run import Output
from agentd.sandboxing import readonly
from agentd.tools.base import ToolResult

MAX_OUTPUT_CHARS = 30_000
# What a persisted output's preview shows.
PREVIEW_CHARS = 2000

# Programs whose exit status 1 means an answer, not a failure.
_SOFT_FAILURES: dict[str, str] = {
    "grep": "No matches found",
    "egrep": "No matches found",
    "fgrep": "No matches found",
    "rg": "No matches found",
    "ag": "No matches found",
    "diff": "Files differ",
    "cmp": "Files differ",
    "test": "Condition is false",
    "[": "Condition is false",
    "[[": "Condition is false",
    "find": "Some paths could not be read",
}
_SEPARATORS = re.compile(r"\|\||&&|[|;&\n]")
_BLANK_LINES = re.compile(r"\A(?:[ \t\r\f\v]*\n)+")


def _last_program(command: str) -> str:
    segments = [s for s in _SEPARATORS.split(command) if s.strip()]
    if not segments:
        return ""
    try:
        words = shlex.split(segments[-1])
    except ValueError:
        return ""
    while words and "=" in words[0] and not words[0].startswith("="):
        words.pop(0)
    return os.path.basename(words[0]) if words else ""


def interpret_exit(command: str, code: int) -> tuple[bool, str | None]:
    """(is_error, note): grep finding nothing is an answer, not an error."""
    if code == 0:
        return False, None
    if code == 1 and (note := _SOFT_FAILURES.get(_last_program(command))):
        return False, note
    return True, None


def persisted_output(head: str, output: Output) -> str:
    """The reference's form of an output too large to show: where it is, and its start
    (2000 characters, cut back to a line end when one is in the second half)."""
    preview = head[:PREVIEW_CHARS]
    end = preview.rfind("\n")
    if end > PREVIEW_CHARS // 2:
        preview = preview[:end]
    if output.size >= output.total:
        where = f"Full output saved to: {output.path}"
    else:
        # Past the output file's bound only its head and tail are kept: say what the
        # file holds, not what the command printed.
        where = (
            f"The file keeps its first and last parts ({output.size / 1024:.1f}KB), "
            f"saved to: {output.path}"
        )
    return (
        "<persisted-output>\n"
        f"Output too large ({output.total / 1024:.1f}KB). {where}\n\n"
        f"Preview (first 2KB):\n{preview}\n...\n</persisted-output>"
    )


def finished(
    command: str,
    code: int,
    outcome: str,
    output: Output,
    notices: list[str],
    seen_at: str,
    timeout_ms: float,
    read_only: bool,
) -> ToolResult:
    """The result of a command that ended (`outcome`: done, cancelled or timeout), in the
    reference's form: its output or a persisted preview, the exit code, the notices."""
    shown, cut = head_and_tail(output, MAX_OUTPUT_CHARS)
    is_error, note = interpret_exit(command, code)
    if outcome != "done":
        is_error = True
    persisted = cut and not is_error
    if persisted:
        # As the reference: the whole output is in a file, a 2 KB preview is shown.
        shown = persisted_output(bytes(output.head).decode(errors="ignore"), output)
    elif cut:
        # A failed command's head and tail: its error is usually at the end.
        notices.append(
            f"The output was {output.total} bytes; only its head and tail are "
            f"shown. The full output is in {output.path} (Read it with offset "
            f"and limit; in Bash commands: {seen_at})."
        )
    # As the reference: the output without its blank first lines and trailing space,
    # and the text shown trimmed at both ends.
    shown = _BLANK_LINES.sub("", shown).rstrip()
    body = shown.strip()
    if outcome == "cancelled":
        notices.append("The command was interrupted; the output above is what it printed.")
    elif outcome == "timeout":
        notices.append(f"Command timed out after {timeout_ms / 1000:g}s and was stopped.")
    if read_only and is_error and (erofs := readonly.erofs_note(shown)):
        notices.append(erofs)
    if is_error and outcome == "done":
        body = f"Exit code {code}\n{body}" if body else f"Exit code {code}"
    if not body and not notices:
        # Also for grep finding nothing: what that means is in returnCodeInterpretation.
        body = "(Bash completed with no output)"
    text = "\n".join(x for x in [body, *notices] if x)
    data = {
        "stdout": shown,
        "stderr": "",
        "exitCode": code,
        "interrupted": outcome != "done",
        "truncated": cut,
    }
    if persisted:
        data["persistedOutputPath"] = output.path
        # What the file holds: past its bound, the head and tail it kept, not all printed.
        data["persistedOutputSize"] = min(output.total, output.size)
    if note:
        data["returnCodeInterpretation"] = note
    return ToolResult.text(text, data=data, is_error=is_error)
