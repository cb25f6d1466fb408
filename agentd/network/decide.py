"""Whether a session's connection goes: the rules, the address guard, a person's answer
when no rule decides, and the record of each decision (counts, the hosts seen, one
journal event per new outcome)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable

from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.network.address import AllowList, internal_reason, literal_address
from agentd.network.connection import Request, Verdict, refused_line
from agentd.network.rules import NetworkRules, normal_host, suggested_entry
from agentd.network.state import AskAnswer, CallNet, HostSeen, SessionNet
from agentd.sessions.event_types import PermissionDecided
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

# Modes in which nobody is asked: an unknown host is refused at once.
NOT_ASKING_MODES = frozenset({"dontAsk", "bypassPermissions"})
# Hosts remembered per session for `session show` and `agentctl network`.
HOSTS_KEPT = 256

# (session, tool_use_id, command, host, port, suggested entry) -> the person's answer
AskFn = Callable[[Session, str, str, str, int, str], Awaitable[AskAnswer]]
RulesFn = Callable[[Session], Awaitable[NetworkRules]]


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class Decisions:
    """The decisions of every session's connections; run on the daemon's loop (rules,
    asks and the journal live there)."""

    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        rules_for: RulesFn,
        ask: AskFn,
        has_listeners: Callable[[str], bool],
    ) -> None:
        self.sessions = sessions
        self.rules_for = rules_for
        self.ask = ask
        self.has_listeners = has_listeners
        # The operator's private hosts (replaced on a reload) and names resolved by config.
        self.private = AllowList(config.network_allow_private_hosts)
        self.resolve_map = {normal_host(k): list(v) for k, v in config.network_resolve.items()}

    async def decide(self, net: SessionNet, request: Request) -> Verdict:
        try:
            session = self.sessions.get(net.session_id)
        except Exception:
            return Verdict(False, reason="the session is closed")
        host = normal_host(request.host)
        port = request.port
        try:
            verdict = await self._decide(session, net, host, port)
        except Exception as exc:  # a decision that fails refuses, never allows
            log.exception("session %s: deciding %s:%d failed", session.id, host, port)
            verdict = Verdict(False, reason=f"agentd could not decide ({exc})")
        self._record(session, net, host, port, request.via, verdict)
        return verdict

    async def _decide(self, session: Session, net: SessionNet, host: str, port: int) -> Verdict:
        rules = await self.rules_for(session)
        hint = suggested_entry(host, port)
        denied = rules.denying(host, port)
        if denied is not None:
            why = f": {denied.why}" if denied.why else ""
            return Verdict(False, reason=f"denied by {denied.shown}{why}")
        literal = literal_address(host)
        if literal is not None:
            named = rules.naming(literal, port)
            if named is None and (refused := self._private(host, literal)) is not None:
                # No rule would allow it: the address guard refuses it whatever the rules.
                return refused
            if named is None:
                return Verdict(
                    False,
                    reason="an IP address; only an allowedDomains entry naming this address "
                    "allows it",
                    hint=hint,
                )
            return self._checked(host, [literal], f"allowed by {named.shown}", hint)
        allowed = rules.allowing(host, port)
        if allowed is not None:
            how = f"allowed by {allowed.shown}"
        else:
            answer = await self._asked(session, net, host, port, hint)
            if not answer.allowed:
                return Verdict(False, reason=answer.decided_by, hint=hint)
            how = f"allowed by {answer.decided_by}"
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            return Verdict(False, reason=f"{host} does not resolve ({exc})")
        if not addresses:
            return Verdict(False, reason=f"{host} resolves to no address")
        return self._checked(host, addresses, how, hint)

    def _private(self, host: str, address: str) -> Verdict | None:
        """The refusal of an internal address the operator did not list; None if not one."""
        reason = internal_reason(address)
        if not reason or self.private.allows(host, address):
            return None
        shown = (
            f"{host} is a {reason} IP address"
            if host == address
            else f"{host} resolves to {address}, a {reason} address"
        )
        return Verdict(
            False,
            reason=f"{shown}; only hosts the operator lists in "
            "network_allow_private_hosts may be inside this machine or its network",
        )

    def _checked(self, host: str, addresses: list[str], how: str, hint: str) -> Verdict:
        for address in addresses:
            if (refused := self._private(host, address)) is not None:
                return refused
        return Verdict(True, addresses, how, hint)

    async def _resolve(self, host: str, port: int) -> list[str]:
        mapped = self.resolve_map.get(host)
        if mapped is not None:
            return list(mapped)
        try:
            return await system_resolve(host, port)
        except socket.gaierror as exc:
            raise OSError(exc.strerror) from None

    async def _asked(
        self, session: Session, net: SessionNet, host: str, port: int, hint: str
    ) -> AskAnswer:
        """A person's answer; connections to the same host while it is asked share it."""
        if session.permission_mode in NOT_ASKING_MODES:
            return AskAnswer(
                False,
                f"not allowed, and the session's mode ({session.permission_mode}) asks nobody",
            )
        if not self.has_listeners(session.id):
            return AskAnswer(False, "not allowed, and no person is attached to ask")
        key = (host, port)
        pending = net.asking.get(key)
        if pending is None:
            call = net.calls[0] if net.calls else CallNet("", "")
            pending = asyncio.ensure_future(
                self.ask(session, call.tool_use_id, call.command, host, port, hint)
            )
            net.asking[key] = pending
            pending.add_done_callback(lambda _: net.asking.pop(key, None))
            metrics.network_connection("asked")
        return await asyncio.shield(pending)

    def _record(
        self, session: Session, net: SessionNet, host: str, port: int, via: str, verdict: Verdict
    ) -> None:
        decision = "allowed" if verdict.allowed else "refused"
        metrics.network_connection(decision)
        net.counts[decision] = net.counts.get(decision, 0) + 1
        where = f"{host}:{port}"
        seen = net.hosts.get(where) or HostSeen(decision, verdict.reason)
        seen.decision, seen.reason = decision, verdict.reason
        seen.connections += 1
        seen.last_ms = int(time.time() * 1000)
        net.hosts[where] = seen
        while len(net.hosts) > HOSTS_KEPT:
            net.hosts.pop(next(iter(net.hosts)))
        if not verdict.allowed:
            for call in net.calls:
                call.refused.setdefault(where, refused_line(host, verdict))
        key = (where, decision, verdict.reason)
        if key in net.journaled:
            return
        if len(net.journaled) > 4 * HOSTS_KEPT:
            net.journaled.clear()
        net.journaled.add(key)
        self.sessions.log(session.id).emit(
            PermissionDecided(
                tool_use_id=net.calls[0].tool_use_id if net.calls else "",
                tool_name="Network",
                behavior="allow" if verdict.allowed else "deny",
                decided_by=verdict.reason,
                reason=f"{where} ({via})",
            )
        )
        log.info("session %s: %s %s (%s): %s", session.id, decision, where, via, verdict.reason)
