"""agentctl's tool calls: `call` (a tool run in a session, its output shown live once, its
approval waited for with the prompt's code), `cancel` and `tools`; what `call` exits with."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import grpc

from agentd_client.cli import names
from agentd_client.core.calls import ImageBlock, new_tool_use_id
from agentd_client.core.client import Client, ToolResult
from agentd_client.core.errors import INTERRUPTED, OK, TOOL_FAILED, Refused
from agentd_client.terminal import hangup
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.display import print_json, print_json_line, request_code
from agentd_client.terminal.follow import Follower
from agentd_client.terminal.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb


def _print_result(result: ToolResult, as_json: bool, shown: str = "") -> None:
    """The result on stdout; `shown`: the output already streamed to this terminal,
    printed again only where the result says more than it did."""
    if as_json:
        print_json(
            {
                "content": result.to_dict()["content"],
                "is_error": result.is_error,
                "data": result.data,
            }
        )
        return
    if shown:
        # The command's output is on the screen already: only what the result adds
        # (a timeout, a note on a persisted output, an interruption) goes after it.
        rest = _beyond_output(result)
        if rest:
            print(rest, file=sys.stderr)
        return
    for block in result.content:
        if hasattr(block, "text"):
            print(block.text)
        else:
            kind = "image" if isinstance(block, ImageBlock) else "document"
            print(f"[{kind} {one(block.media_type)}, {len(block.data)} bytes]")


def _beyond_output(result: ToolResult) -> str:
    """A Bash result's text without the output it quotes and its `Exit code N` line."""
    data = result.data if isinstance(result.data, dict) else {}
    text = result.text
    stdout = data.get("stdout") or ""
    if stdout and stdout in text:
        text = text.replace(stdout, "", 1)
    lines = [
        ln
        for ln in text.strip().splitlines()
        if ln.strip()
        and not (ln.startswith("Exit code ") and ln[10:].strip().lstrip("-").isdigit())
        and ln != "(Bash completed with no output)"
    ]
    return "\n".join(lines)


def exit_status(result: ToolResult) -> int:
    """What `agentctl call` exits with: a command's own exit status where it ran to one
    (as `docker exec` and `kubectl exec` do), else 1 for an error result and 0."""
    data = result.data if isinstance(result.data, dict) else {}
    code = data.get("exitCode")
    if isinstance(code, int) and not isinstance(code, bool) and "backgroundTaskId" not in data:
        if code < 0:  # killed by a signal: as a shell says it
            return min(255, 128 - code)
        return min(code, 255)
    return TOOL_FAILED if result.is_error else OK


def _cancel_after_interrupt(c: Client, session_id: str, tool_use_id: str) -> bool:
    """CancelCall, retried briefly: Ctrl-C may come before the daemon has the call."""
    delay = 0.05
    for _ in range(6):
        try:
            if c.cancel(session_id, tool_use_id, timeout=5):
                return True
        except grpc.RpcError:
            return False
        time.sleep(delay)
        delay *= 2
    return False


def _waiting_line(progress: pb.Progress) -> str:
    n = progress.attached_clients
    code = request_code(progress.permission_request_id)
    who = f"{n} attached client{'s' if n != 1 else ''}" if n else "the attached clients"
    return (
        f"agentctl: waiting for approval on {who}, code {code} "
        f"(the prompt with this code is the real one; answer it in `agentctl attach`)"
    )


def cmd_call(c: Client, args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.input == "-" else args.input
    session_id = names.of_args(c, args)
    tool_use_id = args.id or new_tool_use_id()
    # The command's output is shown live on one terminal, once: on stdout if that is a
    # terminal (the result then adds only what the output did not say), else on stderr
    # if that is one (stdout, a file or a pipe, gets the result whole).
    live = None if args.json else sys.stdout if terminal.is_tty() else None
    if live is None and not args.json and terminal.is_tty(sys.stderr):
        live = sys.stderr
    ask_timeout = names.parse_duration(args.ask_timeout) if args.ask_timeout else 0
    last_byte = bytearray()  # of the output shown live; empty while none was

    def to_terminal(output_id: str, data: bytes) -> None:
        assert live is not None
        if not data:  # the output ended
            return
        last_byte[:] = data[-1:]
        live.buffer.write(data)  # a safe stream: control characters shown, not run
        live.buffer.flush()

    follower = Follower(c, session_id, to_terminal)
    output_id = ""
    asked: set[str] = set()
    stream = None
    try:
        # Inside the try: a signal that lands once the daemon has the call, however soon,
        # still cancels it.
        stream = c.stream_tool(session_id, args.tool, text, tool_use_id, ask_timeout=ask_timeout)
        for update in stream:
            if update.HasField("progress"):
                p = update.progress
                if p.permission_request_id and p.permission_request_id not in asked:
                    asked.add(p.permission_request_id)
                    if args.json:  # stdout holds the one result object
                        waiting = {
                            "request_id": p.permission_request_id,
                            "code": request_code(p.permission_request_id),
                            "attached_clients": p.attached_clients,
                        }
                        print(json.dumps({"waiting_for_approval": waiting}), file=sys.stderr)
                    else:
                        print(_waiting_line(p), file=sys.stderr, flush=True)
                if live is not None and p.output_id:
                    output_id = p.output_id
                    follower.follow(output_id)
            else:
                if output_id:
                    follower.wait(output_id, timeout=60)  # its last bytes before the result
                follower.stop()
                result = ToolResult.from_pb(update.result)
                if result.is_error and not args.json:
                    _did_you_mean(c, args.tool, result)
                on_screen = live is sys.stdout and bool(last_byte)
                if on_screen and last_byte != b"\n":
                    print()  # what follows starts on a line of its own
                _print_result(result, args.json, "output" if on_screen else "")
                if args.json:  # the documented codes; the exit status is in `data`
                    return TOOL_FAILED if result.is_error else OK
                return exit_status(result)
    except KeyboardInterrupt as exc:  # Ctrl-C, or the caller went away (hangup.py)
        follower.stop()
        cancelled = _cancel_after_interrupt(c, session_id, tool_use_id)
        if stream is not None:
            stream.cancel()
        what = hangup.why(exc)
        if args.json:
            with contextlib.suppress(OSError):
                print_json_line(
                    {"interrupted": True, "cancelled": cancelled, "tool_use_id": tool_use_id}
                )
        if cancelled:
            hangup.say(f"agentctl: {what}; cancelled {one(args.tool)} call {one(tool_use_id)}")
        else:
            hangup.say(
                f"agentctl: {what}; the daemon had no running call {one(tool_use_id)} to cancel"
            )
        return hangup.exit_code(exc, INTERRUPTED)
    raise Refused("the daemon ended the call without a result")


def _did_you_mean(c: Client, tool: str, result: ToolResult) -> None:
    """A tool name the daemon does not know, said for a person: the one meant, if its
    spelling differs only in case or by a little (`bash` -> Bash)."""
    if "No such tool available" not in result.text:
        return
    import difflib

    known = [t["name"] for t in c.list_tools()]
    same_case = [k for k in known if k.lower() == tool.lower()]
    close = same_case or difflib.get_close_matches(tool, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    print(
        f"agentctl: no tool {one(tool)}; {hint}`agentctl tools` lists them (names are "
        "case-sensitive)",
        file=sys.stderr,
    )


def cmd_cancel(c: Client, args: argparse.Namespace) -> int:
    session_id = names.of_args(c, args)
    cancelled = c.cancel(session_id, args.call)
    if args.json:
        print_json({"session_id": session_id, "tool_use_id": args.call, "cancelled": cancelled})
    if not cancelled:
        raise Refused(f"no running call {args.call} in session {session_id}")
    if not args.json:
        print(f"cancelled {one(args.call)}")
    return OK


def cmd_tools(c: Client, args: argparse.Namespace) -> int:
    tools = c.list_tools()
    if args.json or args.format == "anthropic":
        print_json(tools)
    else:
        for t in tools:
            first = t["description"].strip().splitlines()[0] if t["description"] else ""
            print(f"{one(t['name']):14} {one(first)}")
    return OK
