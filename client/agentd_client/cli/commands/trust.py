"""`agentctl trust`: list, approve and revoke trusted workspace settings content.

A workspace's `.claude/settings*.json` widens permissions (allow rules, directories, a
widening defaultMode, hooks) only while its exact content is trusted. `approve` shows
what the content widens and trusts that content (its sha256), nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from agentd_client.core import structs
from agentd_client.core.client import Client
from agentd_client.terminal.sanitize import line as one
from agentd_client.v1 import agentd_pb2 as pb


def _entry_dict(e: pb.TrustEntry) -> dict[str, Any]:
    out = MessageToDict(
        e, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    out["widens"] = structs.optional_struct(e, "widens")
    return out


def _widening_lines(widens: dict[str, Any]) -> list[str]:
    # JSON with every non-ASCII character escaped: a key or value holds no control,
    # bidi or invisible character a person could misread.
    text = json.dumps(widens, indent=2, sort_keys=True, ensure_ascii=True)
    return ["    " + one(line) for line in text.splitlines()]


def _describe(e: pb.TrustEntry) -> str:
    if e.state == "unreadable":
        return f"unreadable  {one(e.path)}: {one(e.error)}"
    head = f"{one(e.state):10}  {one(e.path)}\n            sha256 {one(e.sha256)}"
    if e.state == "trusted":
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.approved_ms / 1000))
        who = (
            "daemon config" if e.source == "config" else f"approved by {one(e.approved_by)} {when}"
        )
        head += f"  ({who}{', the content now' if e.current else ''})"
    lines = [head]
    if widens := structs.optional_struct(e, "widens"):
        lines.append("            widens:")
        lines += _widening_lines(widens)
    return "\n".join(lines)


def _settings_path(raw: str) -> str:
    path = os.path.abspath(raw)
    if os.path.isdir(path):  # a workspace: its settings.json
        path = os.path.join(path, ".claude", "settings.json")
    return path


def cmd_trust_ls(c: Client, args: argparse.Namespace) -> int:
    entries = c.list_trust(_settings_path(args.path) if args.path else "")
    if args.json:
        print(json.dumps([_entry_dict(e) for e in entries], indent=2, sort_keys=True))
        return 0
    if not entries:
        print("nothing trusted, and no open session's settings widen anything")
    for e in entries:
        print(_describe(e))
    return 0


def cmd_trust_approve(c: Client, args: argparse.Namespace) -> int:
    path = _settings_path(args.path)
    sha = args.sha256
    if not sha:
        now = [e for e in c.list_trust(path) if e.current or e.state == "unreadable"]
        if not now:
            print(f"agentctl: {one(path)} does not exist", file=sys.stderr)
            return 1
        entry = now[0]
        if entry.state == "unreadable":
            print(f"agentctl: {one(path)}: {one(entry.error)}", file=sys.stderr)
            return 1
        sha = entry.sha256
        if not args.json:
            print(_describe(entry))
        if not args.yes:
            try:
                answer = input("Trust these settings? [y/N]: ").strip().lower()
            except EOFError:
                answer = ""
            if answer not in ("y", "yes"):
                print("not trusted", file=sys.stderr)
                return 1
    entry = c.approve_trust(path, sha)
    if args.json:
        print(json.dumps(_entry_dict(entry), indent=2, sort_keys=True))
    else:
        print(f"trusted {one(entry.path)} (sha256 {one(entry.sha256)})")
    return 0


def cmd_trust_revoke(c: Client, args: argparse.Namespace) -> int:
    path = _settings_path(args.path)
    gone = c.revoke_trust(path, args.sha256 or "")
    if args.json:
        print(json.dumps([_entry_dict(e) for e in gone], indent=2, sort_keys=True))
    elif not gone:
        print(f"no approval of {one(path)} to revoke")
    else:
        for e in gone:
            print(f"revoked {one(e.path)} (sha256 {one(e.sha256)})")
    return 0
