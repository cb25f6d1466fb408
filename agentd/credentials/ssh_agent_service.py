"""The ssh-agent each sandbox of a session sees at $SSH_AUTH_SOCK: served by the daemon,
signing with keys the sandbox never holds (key files the daemon reads, or the owner's
own agent), only for the hosts the config names.

A signature, in order (agentd/credentials/ssh_agent_wire.py for the bytes):
1. The connection was bound first with OpenSSH's `session-bind@openssh.com` (ssh 8.9+
   sends it before user authentication): the host key's signature over the session id
   checks out, the host key is one the known_hosts file lists for a host in
   `ssh_agent_hosts`, and the bind is not for agent forwarding. One bind per connection.
2. What is to be signed is a user-authentication request for that bound session (so no
   commit, no other host's challenge), naming the key asked for.
3. Neither the session's network rules nor an `SshAgent(...)` deny rule deny the host
   (by any name its key is known by), and an `SshAgent(...)` allow rule of the config
   or the session, or a person, allows this key for it: asked on first use on every
   attached terminal, as a network ask; "always" adds the rule to the session
   (agentd/credentials/ssh_agent_rules.py). While protected refs apply
   (`credential_protected_refs`), a push over ssh could update them unread: only an
   allow rule of the daemon's config signs then.
Adding, removing, locking, unlocking keys and every other request are refused. Each
signature and each refusal is a `permission_decided` event (tool "SshAgent").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentd.credentials import ssh_agent_dir as agent_dir
from agentd.credentials import ssh_agent_wire as wire
from agentd.credentials.ssh_agent_keys import FileKey, KeySourceError, Upstream
from agentd.credentials.ssh_agent_record import Record
from agentd.credentials.ssh_agent_rules import (
    Host,
    hosts_of,
    known_hosts_text,
    parse_hosts,
    rule_for,
    ruled,
)
from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError
from agentd.network.decide import NOT_ASKING_MODES
from agentd.network.loop import ServiceLoop
from agentd.network.rules import NetworkRules
from agentd.network.state import AskAnswer
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session, SessionManager

log = logging.getLogger(__name__)

# Connections one session may hold open to its agent at once; past it, refused.
MAX_CONNECTIONS = 64

# (session, host, key fingerprint, user, the rule "always" adds) -> the person's answer
AskFn = Callable[[Session, str, str, str, str], Awaitable[AskAnswer]]
RulesFn = Callable[[Session], Awaitable[NetworkRules]]


@dataclass
class _Bound:
    hosts: list[Host]  # every configured name of the host key (the first is shown)
    host_key: bytes
    session_id: bytes


@dataclass
class _Conn:
    session_id: str
    upstream: Upstream | None
    bound: _Bound | None = None
    # Bound for forwarding: the connection serves a remote host; nothing more is answered
    # (not even the list of keys).
    forwarded: bool = False


@dataclass
class _SessionAgent:
    path: str  # its directory (agentd/credentials/ssh_agent_dir.py)
    known_hosts: bool = False
    server: asyncio.Server | None = None
    open: int = 0
    asking: dict[tuple[str, str], asyncio.Future[AskAnswer]] = field(default_factory=dict)


def _close(agent: _SessionAgent) -> None:
    if agent.server is not None:
        agent.server.close()


class Refused(Exception):
    """A request the agent answers with failure; the message is journaled."""


class SshAgentService:
    """The agents of all sessions; made by the daemon when `ssh_agent_hosts` is set."""

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
        self.hosts = parse_hosts(config.ssh_agent_hosts)
        try:
            self.files = [FileKey(p) for p in config.ssh_agent_key_files]
        except KeySourceError as exc:
            raise ConfigError(str(exc)) from None
        self.upstream_path = config.ssh_agent_upstream
        self.known_hosts = config.ssh_agent_known_hosts or os.path.expanduser("~/.ssh/known_hosts")
        self._agents: dict[str, _SessionAgent] = {}
        self._opening = threading.Lock()
        self.record = Record(sessions)
        # Sandboxes' connections are served on a loop of their own; each request is
        # answered on the daemon's (rules, asks, the journal).
        self.served = ServiceLoop("agentd-ssh-agent", loop)

    # --- the socket each sandbox sees ---------------------------------------------------

    def access(
        self, session: Session, session_dir: str, env: dict[str, str]
    ) -> list[tuple[str, str]]:
        """The bind that shows the session's agent directory (its socket, its hosts' keys)
        in a sandbox; `env` gets SSH_AUTH_SOCK and git's ssh the known_hosts. Made on
        first use (from any thread) in `session_dir`, the session's own directory that its
        sandbox identity may walk through (bwrap, running as that identity, resolves a
        bind's source by name: agentd/sessions/dirs.py)."""
        with self._opening:
            agent = self._agents.get(session.id)
            if agent is None:
                agent = self._open(session.id, session_dir)
        env["SSH_AUTH_SOCK"] = agent_dir.SOCKET_MOUNT
        if agent.known_hosts:
            ssh = env.get("GIT_SSH_COMMAND", "ssh")
            env["GIT_SSH_COMMAND"] = f"{ssh} -o GlobalKnownHostsFile={agent_dir.KNOWN_HOSTS_MOUNT}"
        return [(agent.path, agent_dir.MOUNT)]

    def serve_kept(self, session_ids: Iterable[str]) -> int:
        """At start: serve again, at once, the agent of each session whose tasks were taken
        over and whose sandboxes were shown one (its directory is there), so a task that
        outlived the last daemon logs in through this one before the session's next call.
        How many were served."""
        served = 0
        for session_id in sorted(set(session_ids)):
            session_dir = self._session_dir(session_id)
            if not os.path.isdir(agent_dir.path_in(session_dir)):
                continue
            try:
                with self._opening:
                    if session_id not in self._agents:
                        self._open(session_id, session_dir)
                        served += 1
            except OSError as exc:
                log.warning("session %s: ssh-agent cannot be served again: %s", session_id, exc)
        return served

    def _session_dir(self, session_id: str) -> str:
        return session_dirs.of(self.config.state_dir).session_path(session_id)

    def _open(self, session_id: str, session_dir: str) -> _SessionAgent:
        path = agent_dir.make(session_dir)
        sock = agent_dir.listen(path)
        agent = _SessionAgent(path)
        try:
            text = known_hosts_text(self.hosts, self.known_hosts)
        except KeySourceError as exc:
            log.warning("session %s: ssh-agent: %s", session_id, exc)
            text = ""
        try:
            if text:
                agent_dir.write_known_hosts(path, text)
            else:
                agent_dir.remove_known_hosts(path)
        except OSError:
            sock.close()
            raise
        agent.known_hosts = bool(text)
        self._agents[session_id] = agent

        async def serve() -> None:
            agent.server = await asyncio.start_unix_server(
                lambda r, w: self._serve(session_id, agent, r, w), sock=sock
            )

        self.served.submit(serve())
        log.info("session %s: ssh-agent listening", session_id)
        return agent

    async def close_session(self, session: Session) -> None:
        """The session's agent stops and its directory goes, whichever daemon made it."""
        agent = self._agents.pop(session.id, None)
        self.record.closed(session.id)
        if agent is not None:
            self.served.call(_close, agent)
            for pending in agent.asking.values():
                pending.cancel()
        agent_dir.remove(self._session_dir(session.id))

    def stop(self, keep: Callable[[str], bool] = lambda _: False) -> None:
        """Stop serving. The directory of a session in `keep` (a task of it runs on, for
        the next daemon to take over) stays as it is: its sandboxes see it bound, and the
        next daemon puts its own socket there; the others' go."""
        self.served.stop()
        for session_id, agent in self._agents.items():
            if not keep(session_id):
                agent_dir.remove(os.path.dirname(agent.path))
        self._agents.clear()

    # --- one connection -----------------------------------------------------------------

    async def _serve(
        self,
        session_id: str,
        agent: _SessionAgent,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if agent.open >= MAX_CONNECTIONS:
            writer.close()
            return
        agent.open += 1
        upstream = Upstream(self.upstream_path) if self.upstream_path else None
        conn = _Conn(session_id, upstream)
        try:
            while True:
                message = await wire.read_message(reader)
                if message is None:
                    break
                answer = await self.served.on_daemon(self._answer(conn, message))
                writer.write(wire.frame(answer))
                await writer.drain()
        except wire.WireError as exc:
            # Framing is lost past a bad length: the connection ends, the agent goes on.
            why = f"a malformed message ({exc}); connection closed"
            self.served.to_daemon(self.record.refused, session_id, why)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            agent.open -= 1
            if upstream is not None:  # its connection lives on the daemon's loop
                self.served.to_daemon(upstream.close)
            writer.close()

    async def _answer(self, conn: _Conn, message: bytes) -> bytes:
        kind = message[0]
        r = wire.Reader(message[1:])
        try:
            if conn.forwarded:
                raise Refused("a request on a connection bound for agent forwarding")
            if kind == wire.REQUEST_IDENTITIES:
                r.end()
                return await self._identities(conn)
            if kind == wire.SIGN_REQUEST:
                return await self._sign(conn, r)
            if kind == wire.EXTENSION:
                name = r.string()
                if name != wire.SESSION_BIND:
                    raise Refused(f"the extension {name[:60]!r} is not served")
                await self._bind(conn, r, message)
                return wire.status(True)
            raise Refused(f"request {kind} is refused (keys cannot be added, removed or locked)")
        except Refused as exc:
            self.record.refused(conn.session_id, str(exc))
        except wire.WireError as exc:
            self.record.refused(conn.session_id, f"a malformed request ({exc})")
        except KeySourceError as exc:
            log.warning("session %s: ssh-agent: %s", conn.session_id, exc)
        except Exception:  # a check that fails refuses, never signs
            log.exception(
                "session %s: ssh-agent: answering request %d failed", conn.session_id, kind
            )
        if kind == wire.EXTENSION:
            return bytes([wire.EXTENSION_FAILURE])
        return wire.status(False)

    async def _identities(self, conn: _Conn) -> bytes:
        blobs = [k.blob for k in self.files]
        if conn.upstream is not None:
            try:
                blobs += await conn.upstream.identities()
            except KeySourceError as exc:  # the owner's agent is gone: the files still sign
                log.warning("session %s: ssh-agent: %s", conn.session_id, exc)
        blobs = list(dict.fromkeys(blobs))
        body = b"".join(
            wire.string(b) + wire.string(f"agentd {wire.fingerprint(b)}".encode()) for b in blobs
        )
        return bytes([wire.IDENTITIES_ANSWER]) + len(blobs).to_bytes(4, "big") + body

    async def _bind(self, conn: _Conn, r: wire.Reader, message: bytes) -> None:
        host_key, session_id, signature = r.string(), r.string(), r.string()
        forwarding = r.boolean()
        r.end()
        if conn.bound is not None:
            raise Refused("a second session bind on one connection")
        if forwarding:
            conn.forwarded = True
            raise Refused("a bind for agent forwarding (the agent is not forwarded)")
        if not session_id or len(session_id) > wire.MAX_SESSION_ID:
            raise Refused("a session bind with a session id of a wrong size")
        if not wire.verify(host_key, signature, session_id):
            raise Refused("a session bind whose host key signature does not verify")
        names = hosts_of(self.hosts, self.known_hosts, host_key)
        if not names:
            raise Refused(
                f"a session bind to a host key ({wire.fingerprint(host_key)}) that no host in "
                f"ssh_agent_hosts has in {self.known_hosts}"
            )
        conn.bound = _Bound(names, host_key, session_id)
        if conn.upstream is not None:
            with contextlib.suppress(KeySourceError):
                await conn.upstream.bind(message)  # an older agent refuses it: fine

    async def _sign(self, conn: _Conn, r: wire.Reader) -> bytes:
        key_blob, data, flags = r.string(), r.string(), r.u32()
        r.end()
        fp = wire.fingerprint(key_blob)
        bound = conn.bound
        if bound is None:
            raise Refused(f"a signature ({fp}) asked without a session bind")
        try:
            auth = wire.parse_userauth(data, key_blob)
        except wire.WireError as exc:
            raise Refused(
                f"a signature ({fp}) for something other than ssh login ({exc})"
            ) from None
        if auth.session_id != bound.session_id:
            raise Refused(f"a signature ({fp}) for another ssh session than the bound one")
        if auth.host_key is not None and auth.host_key != bound.host_key:
            raise Refused(f"a signature ({fp}) naming another host key than the bound one")
        file_key = next((k for k in self.files if k.blob == key_blob), None)
        if file_key is None and (
            conn.upstream is None or key_blob not in await conn.upstream.identities()
        ):
            raise Refused(f"a signature with a key ({fp}) the agent does not hold")
        try:
            session = self.sessions.get(conn.session_id)
        except Exception:
            raise Refused("the session is closed") from None
        host = bound.hosts[0]
        # The user name is the sandbox's words: shown to a person only as plain text.
        user = (
            auth.user if auth.user.isprintable() and len(auth.user) <= 64 else ascii(auth.user[:64])
        )
        who = await self._allowed(session, bound.hosts, fp, user)
        if file_key is not None:
            signature = file_key.sign(data, flags)
        else:
            assert conn.upstream is not None
            signed = await conn.upstream.sign(key_blob, data, flags)
            if signed is None:
                raise Refused(f"the owner's ssh-agent refused to sign with {fp}")
            signature = signed
        self.record.use(conn.session_id, host, fp).signatures += 1
        self.record.journal(
            conn.session_id, "allow", who, f"signed for {user}@{host.shown} with {fp}"
        )
        return bytes([wire.SIGN_RESPONSE]) + wire.string(signature)

    async def _allowed(self, session: Session, names: list[Host], fp: str, user: str) -> str:
        """Who allowed this key for this host in this session; Refused otherwise. The
        host is every name its key is known by: a deny of any of them wins."""
        host = names[0]
        rules = await self.rules_for(session)
        for name in names:
            by_network = rules.denying(name.name, name.port)
            denied = (
                by_network.shown if by_network else ruled(self.config, session, "deny", name, fp)
            )
            if denied is not None:
                self.record.use(session.id, host, fp).refused += 1
                also = f" (its host key is also {name.shown}'s)" if name != host else ""
                raise Refused(f"{fp} for {host.shown}: denied by {denied}{also}")
        # A push over ssh travels encrypted past the daemon, unread: while protected refs
        # apply, only the daemon's config (its operator) may allow a host.
        unread = bool(self.config.credential_protected_refs)
        for name in names:
            allowed = ruled(self.config, session, "allow", name, fp, sessions=not unread)
            if allowed is not None:
                return f"allowed by {allowed}"
        if unread:
            self.record.use(session.id, host, fp).refused += 1
            raise Refused(
                f"{fp} for {host.shown}: agentd cannot read a push over ssh and protected "
                "refs apply (credential_protected_refs); allow the host in the daemon's "
                f'config (allow_rules = ["SshAgent({host.shown})"]) or push through a git route'
            )
        agent = self._agents.get(session.id)
        if agent is None:
            raise Refused("the session's agent is closed")
        if session.permission_mode in NOT_ASKING_MODES:
            why = f"its first use, and the session's mode ({session.permission_mode}) asks nobody"
            raise Refused(f"{fp} for {host.shown}: {why}")
        if not self.has_listeners(session.id):
            raise Refused(f"{fp} for {host.shown}: its first use, and no person is attached")
        key = (host.shown, fp)
        pending = agent.asking.get(key)
        if pending is None:
            pending = asyncio.ensure_future(
                self.ask(session, host.shown, fp, user, rule_for(host, fp))
            )
            agent.asking[key] = pending
            pending.add_done_callback(lambda _: agent.asking.pop(key, None))
        answer = await asyncio.shield(pending)
        if not answer.allowed:
            self.record.use(session.id, host, fp).refused += 1
            raise Refused(f"{fp} for {host.shown}: {answer.decided_by}")
        self.record.use(session.id, host, fp).allowed_by = answer.decided_by
        return answer.decided_by

    def listing(self) -> dict[str, Any]:
        """The configured hosts and keys and which sessions used them, for
        `agentctl credentials` (ListCredentials shows it)."""
        return {
            "hosts": [h.shown for h in self.hosts],
            "known_hosts": self.known_hosts,
            "keys": [{"fingerprint": k.fingerprint, "source": k.path} for k in self.files],
            "upstream": self.upstream_path,
            "sessions": self.record.sessions_used(),
        }
