"""agentctl perms and classify: a session's permission mode and rules, and what the
classifier says of a command."""

from __future__ import annotations

import argparse

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK
from agentd_client.terminal.display import print_json
from agentd_client.terminal.sanitize import line as one


def cmd_classify(c: Client, args: argparse.Namespace) -> int:
    print_json(c.classify(args.command))
    return OK


def cmd_perms(c: Client, args: argparse.Namespace) -> int:
    ask_timeout = None if args.ask_timeout is None else names.parse_duration(args.ask_timeout)
    s = c.update_permissions(
        names.of_args(c, args),
        mode=args.mode or "",
        allow=args.allow,
        deny=args.deny,
        ask=args.ask,
        ask_timeout=ask_timeout,
    )
    rules = {"allow": list(s.allow_rules), "deny": list(s.deny_rules), "ask": list(s.ask_rules)}
    if args.json:
        print_json(
            {
                "permission_mode": s.permission_mode,
                "ask_timeout_seconds": s.ask_timeout_seconds,
                **rules,
            }
        )
        return OK
    waits = f"{s.ask_timeout_seconds:g}s" if s.ask_timeout_seconds else "the daemon's default"
    print(f"session {one(s.name or s.id)}: mode {one(s.permission_mode)}; asks wait {waits}")
    for kind, listed in rules.items():
        if listed:
            print(f"  {kind}: " + ", ".join(one(r) for r in listed))
        else:
            print(f"  {kind}: (none)")
    return OK
