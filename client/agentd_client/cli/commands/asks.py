"""agentctl approve / deny / always CODE: answer a pending ask from any shell or script,
by the four-character code every attached terminal shows for it (display.request_code),
as kubectl answers a certificate request by name."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from agentd_client.cli import names
from agentd_client.core.client import Client
from agentd_client.core.errors import OK, Refused, Usage
from agentd_client.terminal.display import input_text, print_json, request_code
from agentd_client.terminal.sanitize import line as one


@dataclass
class Pending:
    session_id: str
    request_id: str
    tool_name: str
    summary: str
    rule_choices: list[str]


def pending_asks(c: Client, session_id: str) -> list[Pending]:
    """The session's asks not yet answered nor expired, from its journal."""
    last = c.get_session(session_id).last_seq
    found: dict[str, Pending] = {}
    now_ms = time.time() * 1000
    if last == 0:
        return []
    stream = c.attach(session_id, 0, follow=False, timeout=60)
    try:
        for e in stream:
            kind = e.WhichOneof("kind")
            if kind == "permission_requested":
                x = e.permission_requested
                if not x.expires_ms or x.expires_ms > now_ms:
                    found[x.request_id] = Pending(
                        session_id, x.request_id, x.tool_name, input_text(x, 120),
                        list(x.rule_choices),
                    )  # fmt: skip
            elif kind == "permission_resolved":
                found.pop(e.permission_resolved.request_id, None)
            if e.seq >= last:
                break
    finally:
        stream.cancel()
    return list(found.values())


def _find(c: Client, args: argparse.Namespace) -> Pending:
    code = args.code.strip().upper()
    if len(code) != 4:
        raise Usage(f"{args.code!r} is not an ask's code: four characters, as attach shows")
    ref = args.session or args.default_session
    sessions = [names.resolve(c, ref)] if ref else [s.id for s in c.list_sessions()]
    matches = [
        p for sid in sessions for p in pending_asks(c, sid) if request_code(p.request_id) == code
    ]
    if not matches:
        where = f"session {one(ref)}" if ref else "any open session"
        raise Refused(
            f"no pending ask with code {code} in {where}; `agentctl attach SESSION` shows "
            "each ask with its code"
        )
    if len(matches) > 1:
        listed = ", ".join(m.session_id for m in matches)
        raise Refused(f"code {code} is pending in several sessions ({listed}); add --session")
    return matches[0]


def _answer(c: Client, args: argparse.Namespace, decision: str, scope: str) -> int:
    ask = _find(c, args)
    rule = args.rule or ""
    if rule and rule not in ask.rule_choices:
        offered = ", ".join(ask.rule_choices) or "none"
        raise Usage(f"--rule {rule!r} is not one this ask offers ({offered})")
    reply = c.resolve_permission(ask.session_id, ask.request_id, decision, scope, rule)
    if not reply.accepted:
        raise Refused(reply.message)
    if scope == "always" and not rule and ask.rule_choices:
        rule = ask.rule_choices[0]
    if args.json:
        print_json(
            {
                "code": request_code(ask.request_id),
                "request_id": ask.request_id,
                "session_id": ask.session_id,
                "decision": decision,
                "scope": scope,
                "rule": rule,
            }
        )
        return OK
    what = f"{one(ask.tool_name)}: {one(ask.summary)}"
    said = {"allow": "allowed", "deny": "denied"}[decision]
    added = f"; added the rule {one(rule)}" if rule else ""
    print(f"{said} {request_code(ask.request_id)} ({what}) {scope}{added}")
    return OK


def cmd_approve(c: Client, args: argparse.Namespace) -> int:
    return _answer(c, args, "allow", "once")


def cmd_deny(c: Client, args: argparse.Namespace) -> int:
    return _answer(c, args, "deny", "once")


def cmd_always(c: Client, args: argparse.Namespace) -> int:
    return _answer(c, args, "allow", "always")
