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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.foundation.holder import Holder
from agentd.network import env as proxy_env
from agentd.network import netns
from agentd.network.address import AllowList
from agentd.network.connection import (
    Decider,
    Handler,
    Interceptor,
    Listener,
    Request,
    Verdict,
)
from agentd.network.decide import AskFn, Decisions, RulesFn
from agentd.network.http_proxy import serve_http
from agentd.network.loop import ServiceLoop
from agentd.network.socks import serve_socks
from agentd.network.state import CallNet, SessionNet
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

# Connections one session may have open at once through its proxy; past it, refused.
MAX_OPEN_PER_SESSION = 512


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
        self.decisions = Decisions(config, sessions, rules_for, ask, has_listeners)
        self.loop = loop
        self.dir = os.path.join(config.state_dir, "netns")
        self._ssh_proxy = proxy_env.ssh_proxy_script()
        self._nets: dict[str, SessionNet] = {}
        # Calls of one session prepare their sandboxes at once, from several threads (a
        # batch's Glob and Grep): one of them makes the namespace and its listeners.
        self._opening = threading.Lock()
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
        self.decisions.private = AllowList(hosts)

    def end_call(self, session_id: str, call: CallNet) -> list[str]:
        """What was refused while the call ran, one line per host, for its result."""
        net = self._nets.get(session_id)
        if net is not None and call in net.calls:
            net.calls.remove(call)
        return [f"{where}: {why}" for where, why in call.refused.items()]

    async def decide(self, net: SessionNet, request: Request) -> Verdict:
        return await self.decisions.decide(net, request)

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
