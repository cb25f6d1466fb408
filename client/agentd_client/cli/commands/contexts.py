"""agentctl context: named daemons to connect to (client.toml), and where agentctl
would connect now."""

from __future__ import annotations

import argparse

from agentd_client.core import contexts
from agentd_client.core.exits import OK
from agentd_client.terminal.jsonout import print_json


def cmd_context_add(args: argparse.Namespace) -> int:
    entry = contexts.add(
        args.name,
        address=args.address or "",
        server_name=args.server_name or "",
        socket=args.socket or "",
        token_file=args.token_file or "",
        ca=args.ca or "",
        session=args.session or "",
        use=args.use,
    )
    current = contexts.load().get("current_context") == args.name
    if args.json:
        print_json({"name": args.name, "current": current, **entry})
    else:
        print(
            f"context {args.name} saved in {contexts.config_path()}"
            + (" (current)" if current else "")
        )
    return OK


def cmd_context_use(args: argparse.Namespace) -> int:
    contexts.use(args.name)
    if args.json:
        print_json({"current_context": args.name})
    else:
        print(f"now using context {args.name}")
    return OK


def cmd_context_rm(args: argparse.Namespace) -> int:
    contexts.remove(args.name)
    if args.json:
        print_json({"removed": args.name})
    else:
        print(f"removed context {args.name}")
    return OK


def cmd_context_ls(args: argparse.Namespace) -> int:
    data = contexts.load()
    current = data.get("current_context", "")
    if args.json:
        print_json({"current_context": current, "contexts": data["contexts"]})
        return OK
    for name, entry in sorted(data["contexts"].items()):
        where = entry.get("address") or f"unix:{entry.get('socket', '')}"
        if entry.get("address") and entry.get("server_name"):
            where = f"{entry['server_name']} via {where}"
        print(f"{'*' if name == current else ' '} {name:16} {where}")
    return OK


def cmd_context_show(args: argparse.Namespace) -> int:
    endpoint = endpoint_of(args)
    if args.json:
        print_json(endpoint.to_dict())
        return OK
    print(f"agentctl connects to {endpoint.where}")
    for key, source in sorted(endpoint.sources.items()):
        print(f"  {key} = {getattr(endpoint, key)}  (from {source})")
    return OK


def endpoint_of(args: argparse.Namespace) -> contexts.Endpoint:
    flags = {
        "socket": getattr(args, "socket", None),
        "address": getattr(args, "address", None),
        "server_name": getattr(args, "server_name", None),
        "token_file": getattr(args, "token_file", None),
        "ca": getattr(args, "ca", None),
    }
    return contexts.resolve(flags, getattr(args, "context", None))
