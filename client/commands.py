"""agentctl's commands on tasks, logs, permissions, the network, attach and MCP: one
function each, taking the client and the parsed arguments (sessions: session_commands.py;
tool calls: call_commands.py).

Each returns an exit code (see agentd_client.errors) and honours `args.json`. What they
print reaches the person through terminal.py's safe streams; each field that came from
the daemon, a model or a workspace is formatted with `one` (sanitize.line), so it stays
on its line.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentd_client import names, structs, terminal
from agentd_client._client import Client
from agentd_client.display import as_dict, print_json, print_json_line
from agentd_client.errors import INTERRUPTED, OK, Refused, Usage, need
from agentd_client.sanitize import line as one


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


def cmd_classify(c: Client, args: argparse.Namespace) -> int:
    print_json(c.classify(args.command))
    return OK


def cmd_perms(c: Client, args: argparse.Namespace) -> int:
    s = c.update_permissions(
        names.of_args(c, args), mode=args.mode or "", allow=args.allow, deny=args.deny, ask=args.ask
    )
    print_json(
        {
            "permission_mode": s.permission_mode,
            "allow": list(s.allow_rules),
            "deny": list(s.deny_rules),
            "ask": list(s.ask_rules),
        }
    )
    return OK


def cmd_network(c: Client, args: argparse.Namespace) -> int:
    """The session's network; --allow/--deny add WebFetch(domain:) rules, which the
    session's proxy reads for every new connection (they apply at once)."""
    sid = names.of_args(c, args)
    for host in (*args.allow, *args.deny):
        if not host or any(ch in host for ch in "()/ \t"):
            raise Usage(f"{host!r} is not a host name (example.com, *.example.com)")
    if args.allow or args.deny:
        c.update_permissions(
            sid,
            allow=[f"WebFetch(domain:{h})" for h in args.allow],
            deny=[f"WebFetch(domain:{h})" for h in args.deny],
        )
    s = c.get_session(sid)
    summary = structs.optional_struct(s, "network_summary") or {}
    rules = [r for r in (*s.allow_rules, *s.deny_rules) if r.startswith("WebFetch(domain:")]
    if args.json:
        print_json({"network": s.network, "domain_rules": rules, **summary})
        return OK
    print(f"network: {one(s.network)}")
    for rule in s.allow_rules:
        if rule.startswith("WebFetch(domain:"):
            print(f"  allow {one(rule)}")
    for rule in s.deny_rules:
        if rule.startswith("WebFetch(domain:"):
            print(f"  deny  {one(rule)}")
    hosts = summary.get("hosts") or {}
    for where, seen in sorted(hosts.items()):
        print(
            f"  {one(where)}: {one(str(seen.get('decision')))} "
            f"({int(seen.get('connections', 0))}x) {one(str(seen.get('reason', '')))}"
        )
    return OK


def _after_seq(c: Client, session_id: str, start: str) -> int:
    if start == "start":
        return 0
    if start == "now":
        return c.get_session(session_id).last_seq
    try:
        return max(0, int(start))
    except ValueError:
        raise Usage(f"--from {start!r}: use start, now, or an event seq number") from None


def cmd_attach(c: Client, args: argparse.Namespace) -> int:
    session_id = names.of_args(c, args)
    after = args.after_seq if args.after_seq is not None else _after_seq(c, session_id, args.start)
    from agentd_client import contexts
    from agentd_client.attach import AttachView

    view = AttachView(
        c,
        session_id,
        after,
        as_json=args.json,
        interactive=sys.stdin.isatty() and not args.json,
        connect=lambda: contexts.open_client(args.endpoint, wait_for_ready=False),
        raw=args.raw,
    )
    return view.run()


def cmd_mcp(c: Client, args: argparse.Namespace) -> int:
    """The session's tools over MCP on stdin/stdout; a new session with --workspace."""
    need("mcp", "mcp", "agentctl mcp")
    import asyncio

    from agentd_client import contexts
    from agentd_client._aio import AsyncClient
    from agentd_client.cli import version
    from agentd_client.mcp_server import serve_stdio

    if args.workspace and args.session:
        raise Usage("give --session or --workspace, not both")
    created = None
    if args.workspace:
        created = c.create_session(
            args.workspace, permission_mode=args.mode or "", allow_network=args.net
        ).id
    session_id = created or names.of_args(c, args)
    # Asked before serving: a daemon that is not there, or a session that is closed, is
    # the handshake's error (cli.main), not a server whose every call fails later.
    if c.get_session(session_id).closed:
        raise Refused(f"session {session_id} is closed; serve an open one, or --workspace")
    # stdout is the protocol's: what a person should know goes to stderr.
    if args.json:
        print(json.dumps({"serving": session_id, "transport": "stdio"}), file=sys.stderr)
    else:
        print(
            f"agentctl: serving session {one(session_id)} over MCP on stdio; "
            f"answer its asks with `agentctl attach {one(session_id)}`",
            file=sys.stderr,
        )

    async def serve() -> None:
        async with contexts.open_client(args.endpoint, factory=AsyncClient) as aio:
            await serve_stdio(aio, session_id, version())

    args.mcp_serving = True  # from here on the MCP SDK answers the client, errors too
    # stdout is the protocol's from here: JSON-RPC, which escapes what it carries.
    terminal.protocol_stdout()

    try:
        asyncio.run(serve())
    finally:
        if created:
            c.close_session(created)
    return OK
