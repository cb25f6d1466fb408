"""agentctl tasks (ls, stop) and logs: a session's background tasks and their output."""

from __future__ import annotations

import argparse
import sys

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import INTERRUPTED, OK, Refused
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.display import as_dict, print_json, print_json_line
from agentd_client.terminal.sanitize import line as one


def cmd_tasks(c: Client, args: argparse.Namespace) -> int:
    tasks = c.list_tasks(names.of_args(c, args), include_finished=True)
    if args.json:
        print_json([as_dict(t) for t in tasks])
        return OK
    if not tasks:
        print("no background tasks")
        return OK
    for t in tasks:
        code = f" exit {t.exit_code}" if t.has_exit_code else ""
        print(
            f"{one(t.id)}  {one(t.status):9}{code}  {one(t.command[:60])}  -> {one(t.output_path)}"
        )
    return OK


# `agentctl logs` without --from-start starts this far before the end, then keeps the
# last TAIL_LINES lines of it (as tail does).
_TAIL_BYTES = 16384
TAIL_LINES = 10


def cmd_logs(c: Client, args: argparse.Namespace) -> int:
    """A task's or a Bash call's output, from the file: every byte, nobody's cursor moved.
    On a terminal its control characters show as text (unless --raw); to a pipe or a
    file it is the bytes as they are, like cat."""
    session_id = names.of_args(c, args)
    start = 0 if args.from_start else -_TAIL_BYTES
    stream = c.read_output(session_id, args.id, start, follow=args.follow)
    raw = args.raw or not terminal.is_tty()
    out = terminal.raw_stdout() if raw and not args.json else sys.stdout.buffer
    first = not args.from_start
    try:
        for chunk in stream:
            data = chunk.data
            if first and data:
                first = False
                if chunk.offset > 0:  # started mid-file: drop the partial first line
                    data = data[data.find(b"\n") + 1 :]
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[-TAIL_LINES:])
            if args.json:
                print_json_line(
                    {
                        "offset": chunk.offset,
                        "data": chunk.data.decode(errors="replace"),
                        "done": chunk.done,
                    }
                )
            elif data:
                out.write(data)
                out.flush()
    except KeyboardInterrupt:
        stream.cancel()
        return INTERRUPTED
    return OK


def cmd_tasks_stop(c: Client, args: argparse.Namespace) -> int:
    # TaskStop is the one way the daemon stops a task; it needs no permission, and
    # running it as a call puts the stop in the session's journal for every terminal.
    result = c.run_tool(names.of_args(c, args), "TaskStop", {"task_id": args.task})
    if result.is_error:
        raise Refused(f"cannot stop task {one(args.task)}: {one(result.text.strip())}")
    if args.json:
        print_json(result.data)
    else:
        print(f"stopped {one(args.task)}")
    return OK
