"""agentctl checkpoints, diff, restore, rewind: what each writing call changed (Bash
included), and putting it back. Every path and text from the workspace is shown through
the sanitiser."""

from __future__ import annotations

import argparse
import sys
import time

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Refused
from agentd_client.terminal.display import as_dict, print_json
from agentd_client.terminal.sanitize import line as one
from agentd_client.terminal.sanitize import text as shown
from agentd_client.v1 import agentd_pb2 as pb


def cmd_checkpoints(c: Client, args: argparse.Namespace) -> int:
    found = c.list_checkpoints(names.resolve(c, args.session))
    if args.json:
        print_json([as_dict(x) for x in found])
        return OK
    if not found:
        print("no call of this session has changed files")
        return OK
    for x in found:
        when = time.strftime("%H:%M:%S", time.localtime(x.time_ms / 1000))
        lost = f", {x.not_restorable} not restorable" if x.not_restorable else ""
        state = "" if x.state == "done" else f" [{one(x.state)}]"
        note = f"  ({one(x.note)})" if x.note else ""
        print(
            f"{x.seq:4}  {when}  {one(x.tool_use_id)}  {one(x.tool_name)}  "
            f"+{x.added} ~{x.changed} -{x.deleted}{lost}{state}{note}"
        )
    return OK


def cmd_diff(c: Client, args: argparse.Namespace) -> int:
    diff = c.diff_checkpoint(
        names.resolve(c, args.session),
        args.call,
        since=args.since,
        to=args.to,
        fmt=args.format,
        paths=args.paths,
    )
    if args.json:
        print_json(as_dict(diff))
        return OK
    sys.stdout.write(shown(diff.text))
    return OK


def _plan(answer: pb.RestoreCheckpointResponse) -> None:
    for p in answer.paths:
        if p.action == "none" and not p.conflict:
            continue
        why = f"  ({one(p.conflict)})" if p.conflict else ""
        print(f"  {one(p.action):6} {one(p.path)}{why}")


def _done(answer: pb.RestoreCheckpointResponse, args: argparse.Namespace) -> int:
    if args.json:
        print_json(as_dict(answer))
    else:
        _plan(answer)
        print(one(answer.message))
        if answer.checkpoint:
            print(f"its own checkpoint: {answer.checkpoint} (rewind it to undo this)")
    if not args.dry_run and not answer.applied:
        raise Refused(one(answer.message))
    return OK


def cmd_restore(c: Client, args: argparse.Namespace) -> int:
    answer = c.restore_checkpoint(
        names.resolve(c, args.session),
        args.call,
        args.paths,
        dry_run=args.dry_run,
        on_conflict=args.on_conflict,
    )
    return _done(answer, args)


def cmd_rewind(c: Client, args: argparse.Namespace) -> int:
    session = names.resolve(c, args.session)
    if not args.dry_run and not args.yes:
        if args.json:
            raise Refused("rewind with --json needs --yes (or --dry-run)")
        plan = c.rewind_to_call(session, args.call, dry_run=True, on_conflict=args.on_conflict)
        _plan(plan)
        print(one(plan.message))
        try:
            answer = input("Rewind? [y/N]: ").strip().lower()
        except EOFError:
            answer = ""
        if answer not in ("y", "yes"):
            print("nothing was changed", file=sys.stderr)
            return 1
    done = c.rewind_to_call(session, args.call, dry_run=args.dry_run, on_conflict=args.on_conflict)
    return _done(done, args)
