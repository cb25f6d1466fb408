"""agentctl completion: a shell completion script for agentctl's whole command tree."""

from __future__ import annotations

import argparse

from agentd_client.core.exits import OK, need
from agentd_client.terminal.jsonout import print_json


def cmd_completion(args: argparse.Namespace) -> int:
    need("shtab", "cli", "agentctl completion")
    import shtab

    from agentd_client.cli.tree import build_parser

    script = shtab.complete(build_parser(), shell=args.shell)
    if args.json:
        print_json({"shell": args.shell, "script": script})
    else:
        print(script)
    return OK
