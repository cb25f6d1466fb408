"""`agentctl exec`, `attach-task`, `task-input` and `task-signal`: a person's hands on a
process in a session's sandbox.

`exec [-i] [-t] SESSION -- CMD` runs CMD as a Bash call would (classified,
permission-checked, sandboxed, journaled), in the background as a task of the session,
and links this terminal to it (interactive.TaskLink): `-t` on a pseudo-terminal of this
terminal's size, raw, with the detach sequence; `-i` with this stdin sent to it. The
task is this client's own: if agentctl goes away without detaching, the daemon hangs
it up. `attach-task TASK` joins a running task: its recent output first, then live;
keys go in if it takes input. Several may attach at once: whoever types is typed (see
docs/guides/interactive.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import uuid
from typing import Any

import grpc

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import INTERRUPTED, OK, Refused, Usage, from_grpc
from agentd_client.terminal import rawterm
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.display import print_json
from agentd_client.terminal.interactive import Outcome, TaskLink
from agentd_client.terminal.own_ask import OwnAsk
from agentd_client.terminal.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb


def _call(method: Any, request: Any, timeout: float | None = 60) -> Any:
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as exc:
        raise from_grpc(exc) from None


def _terminal_dict(t: pb.TaskTerminal) -> dict[str, Any]:
    return {
        "task_id": t.task_id,
        "status": t.status,
        "pty": [t.size.rows, t.size.cols] if t.pty else None,
        "stdin_open": t.stdin_open,
        "exit_code": t.exit_code if t.has_exit_code else None,
    }


def _find_task(c: Client, args: argparse.Namespace) -> tuple[str, str]:
    """(session id, task id): the session given, else the open session that has it."""
    ref = args.session or ""
    if ref:
        return names.resolve(c, ref), args.task
    for s in c.list_sessions():
        if any(t.id == args.task for t in c.list_tasks(s.id)):
            return s.id, args.task
    raise Refused(f"no open session has a task {args.task!r}; see `agentctl tasks -s SESSION`")


def _finish(outcome: Outcome, task_id: str, as_json: bool) -> int:
    if as_json:
        print_json({"task_id": task_id, "how": outcome.how, "exit_code": outcome.exit_code})
    elif outcome.how == "detached":
        print(
            f"agentctl: detached from task {one(task_id)}; it runs on "
            f"(agentctl attach-task {one(task_id)})",
            file=sys.stderr,
        )
    elif outcome.how == "lost":
        print(
            f"agentctl: lost the daemon ({one(outcome.error)}); task {one(task_id)} runs on "
            f"under its shim: agentctl attach-task {one(task_id)}",
            file=sys.stderr,
        )
    if outcome.how == "ended":
        return outcome.exit_code if outcome.exit_code is not None else 1
    if outcome.how == "interrupted":
        return INTERRUPTED
    return OK if outcome.how == "detached" else 2


def cmd_exec(c: Client, args: argparse.Namespace) -> int:
    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise Usage("no command: agentctl exec [-it] SESSION -- CMD [ARG...]")
    # One word is a shell command line as Bash takes it; several are quoted as argv.
    command = argv[0] if len(argv) == 1 else shlex.join(argv)
    session_id = names.resolve(c, args.session_ref)
    detach = rawterm.parse_detach_keys(args.detach_keys)
    request = pb.StartTaskRequest(session_id=session_id, command=command, stdin=args.interactive)
    if args.tty:
        size = rawterm.size(0)
        if size is None and not args.json:
            raise Usage("-t needs a terminal on stdin (drop -t to run without one)")
        request.pty.rows, request.pty.cols = size or (24, 80)
    request.tool_use_id = f"toolu_exec_{uuid.uuid4().hex[:20]}"
    asking = os.isatty(0) and not args.json  # a person there answers its own ask
    with OwnAsk(c, session_id, request.tool_use_id) if asking else contextlib.nullcontext():
        # No deadline of ours: a permission ask waits for a person (the daemon bounds it).
        started = _call(c.stub.StartTask, request, timeout=None)
    if args.json:  # for programs: start it, say what it is, and leave it running
        print_json(_terminal_dict(started))
        return OK
    link = TaskLink(
        c,
        session_id,
        started.task_id,
        raw=args.tty,
        send_input=args.interactive or args.tty,
        own=True,
        detach_keys=detach,
        close_at_eof=args.interactive and not args.tty,
    )
    return _finish(link.run(), started.task_id, False)


def cmd_attach_task(c: Client, args: argparse.Namespace) -> int:
    session_id, task_id = _find_task(c, args)
    detach = rawterm.parse_detach_keys(args.detach_keys)
    term = _call(c.stub.GetTaskTerminal, pb.TaskRef(session_id=session_id, task_id=task_id))
    if args.json:
        print_json(_terminal_dict(term))
        return OK
    raw = term.pty and os.isatty(0) and terminal.is_tty()
    link = TaskLink(
        c,
        session_id,
        task_id,
        raw=bool(raw),
        send_input=term.stdin_open and not args.no_stdin and os.isatty(0),
        own=False,
        detach_keys=detach,
        offset=-args.replay if args.replay > 0 else 0,
    )
    return _finish(link.run(), task_id, False)


def cmd_task_input(c: Client, args: argparse.Namespace) -> int:
    session_id, task_id = _find_task(c, args)

    def requests() -> Any:
        yield pb.TaskInput(session_id=session_id, task_id=task_id)
        if args.data is not None:
            yield pb.TaskInput(data=args.data.encode())
        else:
            while chunk := os.read(0, 65536):
                yield pb.TaskInput(data=chunk)
        if args.close:  # in order, after the data
            yield pb.TaskInput(close_stdin=True)

    sent = 0
    if args.data is not None or not args.close:
        sent = _call(c.stub.WriteInput, requests()).bytes
    else:
        _call(c.stub.CloseInput, pb.TaskRef(session_id=session_id, task_id=task_id))
    if args.json:
        print_json({"task_id": task_id, "bytes": sent, "closed": args.close})
    else:
        print(
            f"sent {sent} bytes to task {one(task_id)}"
            + (", closed its stdin" if args.close else "")
        )
    return OK


def cmd_task_signal(c: Client, args: argparse.Namespace) -> int:
    session_id, task_id = _find_task(c, args)
    term = _call(
        c.stub.SignalTask,
        pb.SignalTaskRequest(session_id=session_id, task_id=task_id, signal=args.signal),
    )
    if args.json:
        print_json(_terminal_dict(term))
    else:
        print(f"sent SIG{one(args.signal.upper().removeprefix('SIG'))} to task {one(task_id)}")
    return OK
