"""agentctl's commands: one function each, taking the client and the parsed arguments.

Each returns an exit code (see agentd_client.errors) and honours `args.json`. What they
print reaches the person through terminal.py's safe streams; each field that came from
the daemon, a model or a workspace is formatted with `one` (sanitize.line), so it stays
on its line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid

import grpc

from agentd_client import hangup, names, structs, terminal
from agentd_client._calls import ImageBlock
from agentd_client._client import Client, ToolResult
from agentd_client.display import as_dict, print_json, print_json_line, request_code
from agentd_client.errors import INTERRUPTED, OK, TOOL_FAILED, Refused, Usage, need
from agentd_client.follow import Follower
from agentd_client.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise Usage(f"{what} must look like KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _session(c: Client, args: argparse.Namespace) -> str:
    """The session the command names (or the default one), resolved to its id."""
    return names.resolve(c, args.session or args.default_session)


def cmd_status(c: Client, args: argparse.Namespace) -> int:
    st = c.status()
    if args.json:
        print_json(as_dict(st))
        return OK
    print(
        f"agentd {one(st.version)} (pid {st.pid}) up {st.uptime_seconds:.0f}s on "
        f"{one(st.socket_path)}"
    )
    print(
        f"calls served: {st.calls_served}  calls running: {st.running_calls}  "
        f"tasks running: {st.running_tasks}  sessions open: {st.open_sessions}  "
        f"asks pending: {st.pending_asks}  tasks taken over at start: {st.tasks_readopted}"
    )
    print(f"state dir: {one(st.state_dir)}")
    if st.HasField("state"):
        u = st.state
        cap = f" of {_bytes(u.max_bytes)} cap" if u.max_bytes else " (no cap)"
        idle = f"{_duration(u.session_idle_seconds)}" if u.session_idle_seconds else "never"
        print(
            f"state: {_bytes(u.used_bytes)}{cap}; closed sessions kept "
            f"{_duration(u.retention_seconds)} ({u.closed_sessions} now); idle sessions "
            f"closed after {idle}; {u.sessions_idle_closed} closed idle, "
            f"{u.sessions_reaped} reaped since start"
        )
        if u.disk_full or u.events_unjournaled:
            print(
                f"state disk FULL: {u.events_unjournaled} events not journaled; calls that "
                "change something are refused until space is freed"
                if u.disk_full
                else f"{u.events_unjournaled} events were not journaled (state disk was full)"
            )
        if u.database_problem:
            print(f"state database PROBLEM: {u.database_problem}")
    return OK


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:g}s"


def cmd_session_new(c: Client, args: argparse.Namespace) -> int:
    # The daemon refuses a name an open session has (ALREADY_EXISTS, exit 3).
    s = c.create_session(
        args.workspace,
        cwd=args.cwd or "",
        env=_pairs(args.env, "--env"),
        name=args.name or "",
        labels=_pairs(args.label, "--label"),
        permission_mode=args.mode or "",
        allow_network=args.net,
        network=args.network or "",
    )
    if args.json:
        print_json(as_dict(s))
    else:
        print(one(s.id))
    return OK


def _ago(ms: float) -> str:
    seconds = max(0, time.time() - ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def cmd_session_ls(c: Client, args: argparse.Namespace) -> int:
    sessions = c.list_sessions(include_closed=args.all)
    if args.json:
        print_json([as_dict(s) for s in sessions])
        return OK
    if not sessions:
        print("no open sessions" if not args.all else "no sessions")
        return OK
    rows = []
    for s in sessions:
        state = "closed" if s.closed else "open"
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_ms / 1000))
        idle = _ago(s.last_activity_ms or s.created_ms)
        roots = " ".join(one(r) for r in s.workspace_roots)
        rows.append((one(s.id), state, created, idle, one(s.name) or "-", roots))
    width = max(len(r[0]) for r in rows)
    name_width = max(12, *(len(r[4]) for r in rows))
    print(f"{'ID':{width}}  STATE   CREATED           IDLE  {'NAME':{name_width}}  WORKSPACE")
    for sid, state, created, idle, name, roots in rows:
        print(f"{sid:{width}}  {state:6}  {created}  {idle:>4}  {name:{name_width}}  {roots}")
    return OK


def cmd_session_show(c: Client, args: argparse.Namespace) -> int:
    print_json(as_dict(c.get_session(_session(c, args))))
    return OK


def cmd_session_close(c: Client, args: argparse.Namespace) -> int:
    s = c.close_session(_session(c, args))
    if args.json:
        print_json(as_dict(s))
    else:
        print(f"closed {one(s.id)}")
    return OK


def cmd_session_gc(c: Client, args: argparse.Namespace) -> int:
    idle = names.parse_duration(args.idle) if args.idle else None
    reap_after = names.parse_duration(args.reap_after) if args.reap_after else None
    done = c.collect_sessions(idle, reap_after, dry_run=args.dry_run)
    if args.json:
        print_json({"sessions": [as_dict(d) for d in done], "dry_run": args.dry_run})
        return OK
    now_ms = time.time() * 1000
    would = "would be " if args.dry_run else ""
    for d in done:
        if d.action != "kept":
            print(
                f"{would}{one(d.action)} {one(d.id)}  {one(d.name) or '-'}  "
                f"{'idle' if d.action == 'closed' else 'closed'} "
                f"{_ago(now_ms - d.idle_seconds * 1000)}"
                + (f"  ({one(d.reason)})" if d.reason else "")
            )
    counts = {a: sum(d.action == a for d in done) for a in ("closed", "reaped", "kept")}
    print(
        f"{counts['closed']} {would}closed (idle), {counts['reaped']} {would}reaped "
        f"(closed past retention), {counts['kept']} kept"
    )
    return OK


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
    session_id = _session(c, args)
    tool_use_id = args.id or f"toolu_{uuid.uuid4().hex[:24]}"
    # The command's output is shown live on one terminal, once: on stdout if that is a
    # terminal (the result then adds only what the output did not say), else on stderr
    # if that is one (stdout, a file or a pipe, gets the result whole).
    live = None if args.json else sys.stdout if terminal.is_tty() else None
    if live is None and not args.json and terminal.is_tty(sys.stderr):
        live = sys.stderr
    stream = c.stream_tool(session_id, args.tool, text, tool_use_id)
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
    try:
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


def cmd_cancel(c: Client, args: argparse.Namespace) -> int:
    session_id = _session(c, args)
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


def cmd_tasks(c: Client, args: argparse.Namespace) -> int:
    tasks = c.list_tasks(_session(c, args), include_finished=True)
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
    session_id = _session(c, args)
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
    result = c.run_tool(_session(c, args), "TaskStop", {"task_id": args.task})
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
        _session(c, args), mode=args.mode or "", allow=args.allow, deny=args.deny, ask=args.ask
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
    sid = _session(c, args)
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
    session_id = _session(c, args)
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
    session_id = created or _session(c, args)
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
