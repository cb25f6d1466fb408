"""`agentctl credentials`: the credential sources and routes the daemon is configured
with, and which sessions used each route; the masked credentials (sandbox.credentials)
with their hosts and each session's use. A source is shown by where its secret comes
from (a file, $VARIABLE, `git credential fill`, a command), never by the secret."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from agentd_client.core.client import Client
from agentd_client.terminal.sanitize import line as one


def cmd_credentials(c: Client, args: argparse.Namespace) -> int:
    shown = c.list_credentials()
    if args.json:
        out = MessageToDict(
            shown, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    _masked(shown.masked)
    if not shown.available:
        print("no credential routes: this daemon's proxied sessions have no network of their own")
    elif not shown.sources and not shown.routes:
        print("no credential sources or routes configured (credential_sources, credential_routes)")
    else:
        _routes(shown)
    _ssh_agent(shown.ssh_agent)
    return 0


def _routes(shown: Any) -> None:
    print("sources:")
    for s in shown.sources:
        print(f"  {one(s.name):16} {one(s.kind):15} {one(s.where)}")
    print("routes:")
    for r in shown.routes:
        print(f"  {one(r.name):16} {one(r.kind):5} {one(r.upstream)}  (source {one(r.source)})")
        env = f"  env: {', '.join(one(e) for e in r.env)}" if r.env else ""
        print(f"  {'':16} sandbox: {one(r.url)}{env}")
        for use in r.sessions:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(use.last_ms / 1000))
            print(
                f"  {'':16} session {one(use.session_id)}: {use.requests} requests, "
                f"{use.refused} refused upstream, {use.pushes} pushes, last {when}"
            )
    print(
        "protected refs (a push to them asks): " + ", ".join(one(r) for r in shown.protected_refs)
    )


def _masked(masked: Any) -> None:
    if not masked:
        print("masked credentials: none (credential_env_vars, credential_files)")
        return
    print("masked credentials (the sandbox holds a placeholder; the proxy adds the value):")
    for m in masked:
        where = f"${one(m.name)}" if m.kind == "envVars" else one(m.name)
        if m.mode == "deny":
            print(f"  {where}: denied (the sandbox never sees it)")
            continue
        hosts = ", ".join(one(h) for h in m.inject_hosts) or "no host"
        print(f"  {where}: masked, goes to {hosts} (from {one(m.source)})")
        for use in m.sessions:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(use.last_ms / 1000))
            print(
                f"    session {one(use.session_id)}: {use.requests} requests, "
                f"{use.refused} refused elsewhere, last {when}"
            )


def _ssh_agent(agent: Any) -> None:
    if not agent.enabled:
        print("ssh-agent: off (no ssh_agent_hosts configured)")
        return
    print("ssh-agent (SSH_AUTH_SOCK in networked sandboxes):")
    print(f"  hosts: {', '.join(one(h) for h in agent.hosts)}")
    print(f"  known hosts from: {one(agent.known_hosts) or '~/.ssh/known_hosts'}")
    for key in agent.keys:
        print(f"  key {one(key.fingerprint)}  (file {one(key.source)})")
    if agent.upstream:
        print(f"  and the keys of the owner's agent at {one(agent.upstream)}")
    for use in agent.uses:
        print(
            f"  session {one(use.session_id)}: {one(use.host)} with {one(use.key)}: "
            f"{use.signatures} signed, {use.refused} refused"
            + (f", allowed by {one(use.allowed_by)}" if use.allowed_by else "")
        )
