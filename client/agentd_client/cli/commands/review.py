"""agentctl review: in a session in review mode, the changes a writing Bash call made
wait here; show them, then --apply or --discard. Every path and text from the workspace
is shown through the sanitiser."""

from __future__ import annotations

import argparse
import sys

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Refused
from agentd_client.terminal.display import as_dict, print_json
from agentd_client.terminal.sanitize import line as one
from agentd_client.terminal.sanitize import text as shown


def cmd_review(c: Client, args: argparse.Namespace) -> int:
    session = names.resolve(c, args.session)
    pending = c.list_pending_changes(session, fmt=args.format)
    if not args.action:
        if args.json:
            print_json(as_dict(pending))
        elif not pending.id:
            print("nothing waits for review")
        else:
            call = one(pending.tool_use_id)
            print(f"change set {pending.id} of call {call}: {one(pending.command)}")
            sys.stdout.write(shown(pending.text))
            print(f"apply: agentctl review {one(args.session)} --apply --id {pending.id}")
        return OK
    if not pending.id:
        raise Refused("nothing waits for review in this session")
    answer = c.resolve_pending_changes(
        session, args.id or pending.id, args.action, force=args.force
    )
    if args.json:
        print_json(as_dict(answer))
    else:
        for p in answer.paths:
            if p.conflict:
                print(f"  {one(p.action):6} {one(p.path)}  ({one(p.conflict)})")
        print(one(answer.message))
        if answer.checkpoint:
            print(f"checkpoint {answer.checkpoint}: `agentctl rewind` its call to undo it")
    if not (answer.applied or answer.discarded):
        raise Refused(one(answer.message))
    return OK
