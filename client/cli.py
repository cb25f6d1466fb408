"""agentctl: the command-line client of agentd."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import threading
import time
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from agentd_client._client import Client, ToolResult, default_socket_path
from agentd_client.v1 import agentd_pb2 as pb


def _version() -> str:
    """The installed distribution's version: the client does not import the daemon."""
    try:
        return importlib.metadata.version("agentd")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"agentctl: {what} must look like KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _session_dict(s: pb.Session) -> dict[str, Any]:
    return MessageToDict(s, preserving_proto_field_name=True)


def cmd_status(c: Client, args: argparse.Namespace) -> int:
    st = c.status()
    if args.json:
        _print_json(MessageToDict(st, preserving_proto_field_name=True))
        return 0
    print(f"agentd {st.version} (pid {st.pid}) up {st.uptime_seconds:.0f}s on {st.socket_path}")
    print(
        f"calls served: {st.calls_served}  calls running: {st.running_calls}  "
        f"tasks running: {st.running_tasks}  sessions open: {st.open_sessions}  "
        f"asks pending: {st.pending_asks}"
    )
    print(f"state dir: {st.state_dir}")
    return 0


def cmd_session_new(c: Client, args: argparse.Namespace) -> int:
    s = c.create_session(
        args.workspace,
        cwd=args.cwd or "",
        env=_pairs(args.env, "--env"),
        name=args.name or "",
        labels=_pairs(args.label, "--label"),
        permission_mode=args.mode or "",
        allow_network=args.net,
    )
    if args.json:
        _print_json(_session_dict(s))
    else:
        print(s.id)
    return 0


def cmd_session_ls(c: Client, args: argparse.Namespace) -> int:
    sessions = c.list_sessions(include_closed=args.all)
    if args.json:
        _print_json([_session_dict(s) for s in sessions])
        return 0
    for s in sessions:
        state = "closed" if s.closed else "open"
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_ms / 1000))
        print(f"{s.id}  {state:6}  {created}  {s.name or '-':12}  {' '.join(s.workspace_roots)}")
    return 0


def cmd_session_show(c: Client, args: argparse.Namespace) -> int:
    _print_json(_session_dict(c.get_session(args.id)))
    return 0


def cmd_session_close(c: Client, args: argparse.Namespace) -> int:
    c.close_session(args.id)
    print(f"closed {args.id}")
    return 0


def _print_result(result: ToolResult, as_json: bool) -> int:
    if as_json:
        _print_json(
            {
                "content": result.to_dict()["content"],
                "is_error": result.is_error,
                "data": result.data,
            }
        )
    else:
        for block in result.content:
            if hasattr(block, "text"):
                print(block.text)
            else:
                print(f"[image {block.media_type}, {len(block.data)} bytes]")
    return 1 if result.is_error else 0


def cmd_call(c: Client, args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.input == "-" else args.input
    show_progress = sys.stderr.isatty() and not args.json
    for update in c.stream_tool(args.session, args.tool, text, args.id):
        if update.HasField("progress"):
            if show_progress and update.progress.output:
                sys.stderr.write(update.progress.output)
                sys.stderr.flush()
        else:
            return _print_result(ToolResult.from_pb(update.result), args.json)
    print("agentctl: the daemon ended the call without a result", file=sys.stderr)
    return 1


def cmd_tools(c: Client, args: argparse.Namespace) -> int:
    tools = c.list_tools()
    if args.format == "anthropic":
        _print_json(tools)
    else:
        for t in tools:
            first = t["description"].strip().splitlines()[0] if t["description"] else ""
            print(f"{t['name']:14} {first}")
    return 0


def cmd_tasks(c: Client, args: argparse.Namespace) -> int:
    tasks = c.list_tasks(args.session, include_finished=True)
    if args.json:
        _print_json([MessageToDict(t, preserving_proto_field_name=True) for t in tasks])
        return 0
    for t in tasks:
        code = f" exit {t.exit_code}" if t.has_exit_code else ""
        print(f"{t.id}  {t.status:9}{code}  {t.command[:60]}  -> {t.output_path}")
    return 0


def cmd_classify(c: Client, args: argparse.Namespace) -> int:
    _print_json(c.classify(args.command))
    return 0


def cmd_perms(c: Client, args: argparse.Namespace) -> int:
    s = c.update_permissions(
        args.session, mode=args.mode or "", allow=args.allow, deny=args.deny, ask=args.ask
    )
    _print_json(
        {
            "permission_mode": s.permission_mode,
            "allow": list(s.allow_rules),
            "deny": list(s.deny_rules),
            "ask": list(s.ask_rules),
        }
    )
    return 0


def describe_event(e: pb.Event) -> str:
    """One readable line per event, as `agentctl attach` prints it."""
    kind = e.WhichOneof("kind")
    stamp = time.strftime("%H:%M:%S", time.localtime(e.time_ms / 1000))
    head = f"[{e.seq:>5} {stamp}]"
    match kind:
        case "call_started":
            x = e.call_started
            return f"{head} ▶ {x.name} {x.input_json[:200]} ({x.tool_use_id})"
        case "progress":
            x = e.progress
            if x.output:
                return x.output.rstrip("\n")
            return f"{head}   … {x.message or 'running'} {x.elapsed_ms / 1000:.1f}s"
        case "call_finished":
            x = e.call_finished
            mark = "✗" if x.result.is_error else "✓"
            text = "".join(b.text.text for b in x.result.content if b.HasField("text"))
            first = text.strip().splitlines()[0][:160] if text.strip() else ""
            return f"{head} {mark} {x.name} {x.duration_ms}ms {first}"
        case "todos_changed":
            todos = json.loads(e.todos_changed.todos_json or "[]")
            lines = [f"{head} todos:"]
            for t in todos:
                box = {"completed": "[x]", "in_progress": "[~]"}.get(t.get("status"), "[ ]")
                lines.append(f"    {box} {t.get('content', '')}")
            return "\n".join(lines)
        case "task_started":
            t = e.task_started.task
            return f"{head} task {t.id} started: {t.command[:120]}"
        case "task_finished":
            t = e.task_finished.task
            code = f" with exit code {t.exit_code}" if t.has_exit_code else ""
            return f"{head} task {t.id} {t.status}{code}"
        case "permission_requested":
            x = e.permission_requested
            reasons = "; ".join(x.reasons)
            return (
                f"{head} ? permission for {x.tool_name} {x.input_json[:200]}"
                f"{' — ' + reasons if reasons else ''} (request {x.request_id})"
            )
        case "permission_resolved":
            x = e.permission_resolved
            return f"{head} permission {x.request_id}: {x.decision} ({x.scope}) by {x.decided_by}"
        case "permission_decided":
            x = e.permission_decided
            return (
                f"{head} {x.behavior} {x.tool_name} by {x.decided_by}"
                f"{': ' + x.reason if x.reason else ''}"
            )
        case "cwd_changed":
            return f"{head} cwd {e.cwd_changed.previous} -> {e.cwd_changed.cwd}"
        case "session_closed":
            return f"{head} session closed"
        case "gap":
            return f"{head} (fell behind: events {e.gap.from_seq}-{e.gap.to_seq} replayed)"
    return f"{head} {kind}"


def _ask(c: Client, session_id: str, x: pb.PermissionRequested) -> None:
    """Ask the person at this terminal; the first answer from any terminal wins."""
    try:
        answer = input(f"Allow {x.tool_name}? [y]es / [n]o / [a]lways: ").strip().lower()
    except EOFError:
        return
    decision, scope = {
        "y": ("allow", "once"),
        "yes": ("allow", "once"),
        "a": ("allow", "always"),
        "always": ("allow", "always"),
    }.get(answer, ("deny", "once"))
    try:
        reply = c.resolve_permission(session_id, x.request_id, decision, scope)
        if not reply.accepted:
            print(f"(not applied: {reply.message})", file=sys.stderr)
    except grpc.RpcError as exc:
        print(f"(not applied: {exc.details()})", file=sys.stderr)


def cmd_attach(c: Client, args: argparse.Namespace) -> int:
    interactive = sys.stdin.isatty() and not args.json
    stream = c.attach(args.id, args.after_seq)
    try:
        for event in stream:
            if args.json:
                print(
                    json.dumps(MessageToDict(event, preserving_proto_field_name=True)), flush=True
                )
            else:
                print(describe_event(event), flush=True)
            if interactive and event.HasField("permission_requested"):
                threading.Thread(
                    target=_ask, args=(c, args.id, event.permission_requested), daemon=True
                ).start()
    except KeyboardInterrupt:
        stream.cancel()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentctl", description="Talk to the agentd daemon.")
    p.add_argument("--version", action="version", version=f"agentctl {_version()}")
    p.add_argument("--socket", help=f"daemon socket (default {default_socket_path()})")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("status", help="is the daemon up, and what is it doing")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)

    sess = sub.add_parser("session", help="create, list, show, close sessions")
    ss = sess.add_subparsers(dest="session_command", required=True)
    n = ss.add_parser("new", help="create a session on a workspace")
    n.add_argument("--workspace", action="append", required=True, help="a workspace root")
    n.add_argument("--cwd")
    n.add_argument("--name")
    n.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    n.add_argument("--env", action="append", default=[], help="KEY=VALUE for every command")
    n.add_argument("--mode", help="permission mode")
    n.add_argument("--net", action="store_true", help="let Bash reach the network")
    n.add_argument("--json", action="store_true")
    n.set_defaults(func=cmd_session_new)
    ls = ss.add_parser("ls", help="list sessions")
    ls.add_argument("--all", action="store_true", help="closed ones too")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_session_ls)
    sh = ss.add_parser("show", help="one session as JSON")
    sh.add_argument("id")
    sh.set_defaults(func=cmd_session_show)
    cl = ss.add_parser("close", help="close a session and stop its tasks")
    cl.add_argument("id")
    cl.set_defaults(func=cmd_session_close)

    call = sub.add_parser("call", help="run one tool call")
    call.add_argument("--session", required=True)
    call.add_argument("--id", help="tool_use_id (default: generated)")
    call.add_argument("--json", action="store_true", help="print {content, is_error, data}")
    call.add_argument("tool")
    call.add_argument("input", help="the input as JSON, or - to read it from stdin")
    call.set_defaults(func=cmd_call)

    t = sub.add_parser("tools", help="list the tools")
    t.add_argument("--format", choices=["table", "anthropic"], default="table")
    t.set_defaults(func=cmd_tools)

    a = sub.add_parser("attach", help="follow a session's events live")
    a.add_argument("id")
    a.add_argument("--after-seq", type=int, default=0)
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_attach)

    tk = sub.add_parser("tasks", help="a session's background tasks")
    tk.add_argument("--session", required=True)
    tk.add_argument("--json", action="store_true")
    tk.set_defaults(func=cmd_tasks)

    cf = sub.add_parser("classify", help="what the classifier says of a bash command")
    cf.add_argument("command")
    cf.set_defaults(func=cmd_classify)

    pr = sub.add_parser("perms", help="change a session's permission mode and rules")
    pr.add_argument("--session", required=True)
    pr.add_argument("--mode")
    pr.add_argument("--allow", action="append", default=[])
    pr.add_argument("--deny", action="append", default=[])
    pr.add_argument("--ask", action="append", default=[])
    pr.set_defaults(func=cmd_perms)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with Client(args.socket) as client:
            return args.func(client, args)
    except grpc.RpcError as exc:
        code = exc.code()
        detail = exc.details()
        if code == grpc.StatusCode.UNAVAILABLE:
            socket = args.socket or default_socket_path()
            print(
                f"agentctl: cannot reach agentd at {socket} ({detail}); start it with "
                "`make run` or `agentd serve`, or pass --socket",
                file=sys.stderr,
            )
        else:
            print(f"agentctl: {detail} ({code.name})", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
