"""`agentctl credentials`: the credential sources and routes the daemon is configured
with, and which sessions used each route. A source is shown by where its secret comes
from (a file, $VARIABLE, `git credential fill`), never by the secret."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from agentd_client._client import Client
from agentd_client.sanitize import line as one


def cmd_credentials(c: Client, args: argparse.Namespace) -> int:
    shown = c.list_credentials()
    if args.json:
        out = MessageToDict(
            shown, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not shown.available:
        print("no credential routes: this daemon's proxied sessions have no network of their own")
        return 0
    if not shown.sources and not shown.routes:
        print("no credential sources or routes configured (credential_sources, credential_routes)")
        return 0
    print("sources:")
    for s in shown.sources:
        print(f"  {one(s.name):16} {one(s.kind):15} {one(s.where)}")
    print("routes:")
    for r in shown.routes:
        print(f"  {one(r.name):16} {one(r.kind):5} {one(r.upstream)}  (source {one(r.source)})")
        print(f"  {'':16} sandbox: {one(r.url)}" + (f"  env: {', '.join(r.env)}" if r.env else ""))
        for use in r.sessions:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(use.last_ms / 1000))
            print(
                f"  {'':16} session {one(use.session_id)}: {use.requests} requests, "
                f"{use.refused} refused upstream, {use.pushes} pushes, last {when}"
            )
    print("protected refs (a push to them asks): " + ", ".join(shown.protected_refs))
    return 0


def add_commands(top: Any) -> None:
    top.leaf(
        "credentials",
        "credential sources and routes, and which sessions used them",
        cmd_credentials,
    )
