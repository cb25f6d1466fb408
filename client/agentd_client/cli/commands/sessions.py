"""agentctl's session commands: status, and a session's making, listing, showing, closing
and collection. Each returns an exit code and honours `args.json` (see commands.py)."""

from __future__ import annotations

import argparse
import time

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Refused, Usage
from agentd_client.terminal.display import as_dict, print_json
from agentd_client.terminal.sanitize import line as one


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise Usage(f"{what} must look like KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def cmd_status(c: Client, args: argparse.Namespace) -> int:
    st = c.status()
    if args.json:
        print_json(st.to_dict())
        return OK
    # Over TCP the daemon's socket is a path on another machine: say where we reached it.
    endpoint = getattr(args, "endpoint", None)
    where = endpoint.address if endpoint is not None and endpoint.address else st.socket_path
    print(f"agentd {one(st.version)} (pid {st.pid}) up {st.uptime_seconds:.0f}s on {one(where)}")
    print(
        f"calls served: {st.calls_served}  calls running: {st.running_calls}  "
        f"tasks running: {st.running_tasks}  sessions open: {st.open_sessions}  "
        f"asks pending: {st.pending_asks}  tasks taken over at start: {st.tasks_readopted}"
    )
    print(f"state dir: {one(st.state_dir)}")
    if st.state is not None:
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
        ask_timeout=names.parse_duration(args.ask_timeout) if args.ask_timeout else 0,
        review=args.review,
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
    print_json(as_dict(c.get_session(names.of_args(c, args))))
    return OK


def cmd_session_close(c: Client, args: argparse.Namespace) -> int:
    sid = names.of_args(c, args)
    running = [t.id for t in c.list_tasks(sid) if t.status == "running"]
    if running and not args.force:
        shown = ", ".join(one(t) for t in running[:5]) + (" ..." if len(running) > 5 else "")
        raise Refused(
            f"session {one(args.session or sid)} has {len(running)} running task"
            f"{'s' if len(running) > 1 else ''} ({shown}); closing stops them: add -f/--force, "
            "or stop them first (agentctl tasks stop)"
        )
    s = c.close_session(sid)
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
