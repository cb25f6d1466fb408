"""agentctl perms and classify: a session's permission mode and rules, and what the
classifier says of a command."""

from __future__ import annotations

import argparse

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK
from agentd_client.terminal.display import print_json


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
