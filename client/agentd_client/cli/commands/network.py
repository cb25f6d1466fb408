"""agentctl network: a session's network mode, the hosts it reached or was refused."""

from __future__ import annotations

import argparse

from agentd_client.cli import names
from agentd_client.core import structs
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Usage
from agentd_client.terminal.display import print_json
from agentd_client.terminal.sanitize import line as one

# The rules that decide the session's network by name.
_NET_RULES = ("WebFetch(domain:", "WebFetch(preset:")


def cmd_network(c: Client, args: argparse.Namespace) -> int:
    """The session's network; --allow/--deny add WebFetch(domain:) rules and --preset
    WebFetch(preset:) rules (the daemon knows the presets' names), which the session's
    proxy reads for every new connection (they apply at once)."""
    sid = names.of_args(c, args)
    for host in (*args.allow, *args.deny):
        if not host or any(ch in host for ch in "()/ \t"):
            raise Usage(f"{host!r} is not a host name (example.com, *.example.com)")
    for name in args.preset:
        if not name or any(ch in name for ch in "()/: \t"):
            raise Usage(f"{name!r} is not a preset's name (pypi, npm, github...)")
    if args.allow or args.deny or args.preset:
        c.update_permissions(
            sid,
            allow=[f"WebFetch(domain:{h})" for h in args.allow]
            + [f"WebFetch(preset:{p})" for p in args.preset],
            deny=[f"WebFetch(domain:{h})" for h in args.deny],
        )
    s = c.get_session(sid)
    summary = structs.optional_struct(s, "network_summary") or {}
    rules = [r for r in (*s.allow_rules, *s.deny_rules) if r.startswith(_NET_RULES)]
    if args.json:
        print_json({"network": s.network, "domain_rules": rules, **summary})
        return OK
    print(f"network: {one(s.network)}")
    for rule in s.allow_rules:
        if rule.startswith(_NET_RULES):
            print(f"  allow {one(rule)}")
    for rule in s.deny_rules:
        if rule.startswith(_NET_RULES):
            print(f"  deny  {one(rule)}")
    hosts = summary.get("hosts") or {}
    for where, seen in sorted(hosts.items()):
        print(
            f"  {one(where)}: {one(str(seen.get('decision')))} "
            f"({int(seen.get('connections', 0))}x) {one(str(seen.get('reason', '')))}"
        )
    return OK
