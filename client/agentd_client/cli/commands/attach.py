"""agentctl attach: follow a session's events live (the view is terminal/attach.py)."""

from __future__ import annotations

import argparse
import sys

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import Usage
from agentd_client.terminal.sanitize import line as one


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
    if not args.json:
        # Said at once, so a quiet session does not look like a hang.
        s = c.get_session(session_id)
        who = f"{one(s.name)} ({s.id})" if s.name else s.id
        since = "from the start" if after == 0 else f"after event {after}"
        then = "closed: its history only" if s.closed else "open: then live (Ctrl-C leaves)"
        print(f"attached to session {who}, {s.last_seq} events, {since}; {then}", flush=True)
    from agentd_client.core import contexts
    from agentd_client.terminal.attach import AttachView

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
