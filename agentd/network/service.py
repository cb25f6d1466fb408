"""Each proxied session's network: its namespace, the proxy listening inside it, and the
decision on every new connection.

A decision, in order: a deniedDomains entry (or a WebFetch(domain:) deny rule) refuses;
an IP literal needs an allow entry naming that address; a name needs an allow entry,
else a person is asked on every attached terminal (the same ask as a Bash call's),
refused at once when nobody is attached or the session's mode does not ask. Then the
name is resolved here (the config's `network_resolve` map first, for tests), and each
address checked: loopback, private, link-local and metadata addresses only for hosts the
operator lists in `network_allow_private_hosts`. The connection goes to a checked
address. Every decision is counted, journaled (a `permission_decided` event with
tool_name "Network", once per host and outcome while the same calls run) and kept for
the Bash result and `session show`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.foundation.holder import Holder
from agentd.network import env as proxy_env
from agentd.network import netns
from agentd.network.address import AllowList, internal_reason, literal_address
from agentd.network.connection import (
    Decider,
    Handler,
    Interceptor,
    Listener,
    Request,
    Verdict,
    refused_line,
)
from agentd.network.http_proxy import serve_http
from agentd.network.loop import ServiceLoop
from agentd.network.rules import NetworkRules, normal_host, suggested_entry
from agentd.network.socks import serve_socks
from agentd.network.state import AskAnswer, CallNet, HostSeen, SessionNet
from agentd.sessions.event_types import PermissionDecided
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

# Connections one session may have open at once through its proxy; past it, refused.
MAX_OPEN_PER_SESSION = 512
# Modes in which nobody is asked: an unknown host is refused at once.
NOT_ASKING_MODES = frozenset({"dontAsk", "bypassPermissions"})
# Hosts remembered per session for `session show` and `agentctl network`.
_HOSTS_KEPT = 256


# (session, tool_use_id, command, host, port, suggested entry) -> the person's answer
AskFn = Callable[[Session, str, str, str, int, str], Awaitable[AskAnswer]]
RulesFn = Callable[[Session], Awaitable[NetworkRules]]
Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True, slots=True)
class Access:
    """What a sandbox needs to use its session's proxy."""

    netns: str
    env: dict[str, str]
    # (content, path inside): files the sandbox is given (SandboxPolicy.ro_files).
    ro_files: list[tuple[bytes, str]]


class _SessionDecider(Decider):
    """Runs on the proxy's loop; each decision is made on the daemon's (rules, asks and
    the journal live there) and awaited here."""

    def __init__(self, service: NetworkService, net: SessionNet) -> None:
        self.service = service
        self.net = net
        self.session_id = net.session_id

    async def decide(self, request: Request) -> Verdict:
        return await self.service.proxy_loop.on_daemon(self.service.decide(self.net, request))

    def intercept(self, request: Request) -> Interceptor | None:
        for listener in self.service.listeners:
            taken = listener.intercept(self.session_id, request)
            if taken is not None:
                return taken
        return None

    def carries(self, request: Request, parts: list[bytes]) -> str | None:
        for listener in self.service.listeners:
            refused = listener.carries(self.session_id, request, parts)
            if refused is not None:
                return refused
        return None

    def carried(self, sent: int, received: int) -> None:
        self.net.bytes_out += sent
        self.net.bytes_in += received
        metrics.network_bytes("out", sent)
        metrics.network_bytes("in", received)


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class NetworkService:
    """The proxies of all proxied sessions; made once by the daemon (agentd/daemon.py)."""

    def __init__(
        self,
        config: Config,
        sessions: SessionManager,
        rules_for: RulesFn,
        ask: AskFn,
        has_listeners: Callable[[str], bool],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.rules_for = rules_for
        self.ask = ask
        self.has_listeners = has_listeners
        self.loop = loop
        self.dir = os.path.join(config.state_dir, "netns")
        self._ssh_proxy = proxy_env.ssh_proxy_script()
        self._nets: dict[str, SessionNet] = {}
        # Calls of one session prepare their sandboxes at once, from several threads (a
        # batch's Glob and Grep): one of them makes the namespace and its listeners.
        self._opening = threading.Lock()
        self.private = AllowList(config.network_allow_private_hosts)
        names = {normal_host(k): list(v) for k, v in config.network_resolve.items()}
        self._resolve_map = names
        self.proxy_loop = ServiceLoop("agentd-proxy", loop)
        # The listening sockets of the proxies, held across a restart (holder.py).
        self.holder = Holder(config.state_dir)
        # More listeners in every namespace (credential routes); set before sessions run.
        self.listeners: list[Listener] = []
        self.unavailable = netns.unsupported()
        if self.unavailable:
            log.warning(
                "proxied sessions have no network: %s. Sessions created with network "
                '"on" still have the host\'s',
                self.unavailable,
            )

    def available(self) -> bool:
        """A namespace per session needs root with CAP_SYS_ADMIN (setns, the mount);
        without, proxied sessions have no network at all (`unavailable` says why)."""
        return self.unavailable is None

    # --- the namespace and the listeners ------------------------------------------------

    def access(self, session: Session) -> Access:
        """The session's namespace and proxy, made on first use (from any thread)."""
        with self._opening:
            net = self._nets.get(session.id)
            # `listening`, not `servers`: those are added on the proxy's loop a moment
            # later, and a second bind in between found the port taken (EADDRINUSE).
            if net is None or not net.listening:
                net = self._open(session)
        env = proxy_env.proxy_environment(
            self.config.network_http_port, self.config.network_socks_port
        )
        files = [(self._ssh_proxy, proxy_env.SSH_PROXY_MOUNT)]
        for listener in self.listeners:
            proxy_env.merge(env, listener.environment(session.id))
            files += listener.files(session.id)
        return Access(net.path, env, files)

    def _open(self, session: Session) -> SessionNet:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        path = os.path.join(self.dir, session.id)
        netns.ensure(path)
        handlers: list[Handler] = [serve_http, serve_socks]
        addresses = [
            (proxy_env.PROXY_HOST, self.config.network_http_port),
            (proxy_env.PROXY_HOST, self.config.network_socks_port),
        ]
        for listener in self.listeners:
            port = listener.port()
            if port is not None:
                handlers.append(listener.handle)
                addresses.append((proxy_env.PROXY_HOST, port))
        sockets = self._listening(session.id, path, addresses)
        net = self._nets.get(session.id) or SessionNet(session.id, path)
        self._nets[session.id] = net
        net.servers = []
        net.listening = True

        async def serve() -> None:
            decider = _SessionDecider(self, net)
            for sock, handler in zip(sockets, handlers, strict=True):
                net.servers.append(
                    await asyncio.start_server(
                        self._guarded(net, decider, handler), sock=sock, limit=256 * 1024
                    )
                )

        # Served on the proxy's loop; connections made before it gets to them wait in
        # the listen backlog.
        self.proxy_loop.submit(serve())
        log.info("session %s: proxy listening in its network namespace", session.id)
        return net

    def _listening(
        self, session_id: str, path: str, addresses: list[tuple[str, int]]
    ) -> list[socket.socket]:
        """The session's listening sockets: those the holder kept across a restart (the
        connections made meanwhile wait in them), else new ones, a copy given to it."""
        names = [f"{session_id}/{host}:{port}" for host, port in addresses]
        held = [self.holder.take(name) for name in names]
        if all(sock is not None for sock in held):
            log.info("session %s: its proxy's listening sockets taken over", session_id)
            return [sock for sock in held if sock is not None]
        for sock in held:
            if sock is not None:
                sock.close()
        self.holder.drop(f"{session_id}/")  # bound in the namespace: a new bind needs them gone
        sockets = netns.listen(path, addresses)
        for name, sock in zip(names, sockets, strict=True):
            self.holder.put(name, sock)
        return sockets

    def _guarded(
        self,
        net: SessionNet,
        decider: _SessionDecider,
        handler: Handler,
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if net.open >= MAX_OPEN_PER_SESSION:
                # A flood from one session ends here: others and the daemon go on.
                metrics.network_connection("refused")
                writer.close()
                return
            net.open += 1
            task = asyncio.current_task()
            if task is not None:
                net.handling.add(task)
            try:
                await handler(reader, writer, decider)
            except asyncio.CancelledError:
                writer.close()  # the proxy's loop or the session is ending: so does this
            except Exception:  # a handler's failure ends its connection, never the proxy
                log.exception("session %s: a proxied connection failed", net.session_id)
                writer.close()
            finally:
                net.open -= 1
                if task is not None:
                    net.handling.discard(task)

        return handle

    async def close_session(self, session: Session) -> None:
        """The session closed: its listeners go, its namespace's mount with them."""
        net = self._nets.pop(session.id, None)
        path = os.path.join(self.dir, session.id)
        if net is not None:
            for server in net.servers:
                self.proxy_loop.call(server.close)
            for task in list(net.handling):
                self.proxy_loop.call(task.cancel)
            for fut in net.asking.values():
                fut.cancel()
        if os.path.exists(path):
            await asyncio.get_running_loop().run_in_executor(None, netns.remove, path)
        await asyncio.get_running_loop().run_in_executor(None, self.holder.drop, f"{session.id}/")

    def sweep(
        self, is_open: Callable[[str], bool], known_closed: Callable[[str], bool]
    ) -> tuple[int, list[str]]:
        """At start: the namespaces of sessions the database knows closed (closed while
        the daemon was down) are removed; an open session's is joined again on its next
        call; one of a session the database does not know is left as it is (a database
        that lost history must not cost a session its network). (removed, those left)."""
        removed, unknown = 0, []
        with contextlib.suppress(FileNotFoundError):
            for name in sorted(os.listdir(self.dir)):
                if is_open(name):
                    continue
                if known_closed(name):
                    netns.remove(os.path.join(self.dir, name))
                    self.holder.drop(f"{name}/")
                    removed += 1
                else:
                    unknown.append(name)
        return removed, unknown

    def stop(self, keep: Callable[[str], bool]) -> None:
        """The daemon stops: listeners close; namespaces no task lives in are removed
        (a task that outlives the daemon keeps its session's, which the next joins)."""
        self.proxy_loop.stop()
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.dir):
                if not keep(name):
                    netns.remove(os.path.join(self.dir, name))
                    self.holder.drop(f"{name}/")
        # What is kept stays held for the next daemon; a holder left holding nothing exits.
        self.holder.close()
        self._nets.clear()

    # --- calls ---------------------------------------------------------------------------

    def begin_call(self, session_id: str, tool_use_id: str, command: str) -> CallNet:
        call = CallNet(tool_use_id, command)
        # The session's first proxied call opens its namespace after this: the state it
        # opens with is this one, so the call's refusals are counted from the start.
        net = self._nets.setdefault(
            session_id, SessionNet(session_id, os.path.join(self.dir, session_id))
        )
        net.calls.append(call)
        return call

    def running_call(self, session_id: str) -> CallNet | None:
        """The session's first running call (what a connection is attributed to)."""
        net = self._nets.get(session_id)
        return net.calls[0] if net is not None and net.calls else None

    def allow_private(self, hosts: list[str]) -> None:
        """The operator's private hosts, replaced (a reload): the next connection checks
        its addresses against them."""
        self.private = AllowList(hosts)

    def end_call(self, session_id: str, call: CallNet) -> list[str]:
        """What was refused while the call ran, one line per host, for its result."""
        net = self._nets.get(session_id)
        if net is not None and call in net.calls:
            net.calls.remove(call)
        return [f"{where}: {why}" for where, why in call.refused.items()]

    # --- decisions -----------------------------------------------------------------------

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
        mapped = self._resolve_map.get(host)
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
        while len(net.hosts) > _HOSTS_KEPT:
            net.hosts.pop(next(iter(net.hosts)))
        if not verdict.allowed:
            for call in net.calls:
                call.refused.setdefault(where, refused_line(host, verdict))
        key = (where, decision, verdict.reason)
        if key in net.journaled:
            return
        if len(net.journaled) > 4 * _HOSTS_KEPT:
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

    # --- what people see -----------------------------------------------------------------

    def summary(self, session_id: str) -> dict[str, Any]:
        """The session's network at a glance: for `session show` and `agentctl network`."""
        net = self._nets.get(session_id)
        if net is None:
            return {}
        return {
            "open_connections": net.open,
            "connections": dict(net.counts),
            "bytes_out": net.bytes_out,
            "bytes_in": net.bytes_in,
            "hosts": {
                where: {
                    "decision": h.decision,
                    "reason": h.reason,
                    "connections": h.connections,
                    "last_ms": h.last_ms,
                }
                for where, h in net.hosts.items()
            },
        }
