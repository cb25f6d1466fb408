"""The credential routes of every proxied session: the listener in each namespace
(a `Listener` of the network service), what the sandbox's environment gets, the
decisions only the daemon makes (a push that must ask, on the daemon's loop), every
push journaled, and what `agentctl credentials` shows.

A session uses a route only when its network rules allow the upstream's host (the
daemon's config, a trusted workspace's settings, a person's "always") or a person says
yes when asked: the same decision as any connection, so a workspace's deniedDomains
can restrict a route and nothing in a workspace can grant one.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentd.credentials import paths, push
from agentd.credentials.config import CredentialConfig, Route
from agentd.credentials.relay import RouteConnection
from agentd.credentials.sources import Secret, SourceError, Sources
from agentd.network.connection import Decider, Listener
from agentd.network.env import add_git_config
from agentd.network.service import NetworkService
from agentd.sessions.event_types import GitPush, PushedRef
from agentd.sessions.session import SessionManager

log = logging.getLogger(__name__)

# Sessions remembered per route for `agentctl credentials`.
SESSIONS_KEPT = 256
# (session id, tool_use_id, tool input, reasons) -> (allowed, who decided)
PushAsk = Callable[[str, str, dict[str, Any], list[str]], Awaitable[tuple[bool, str]]]


@dataclass
class Use:
    """One session's use of one route."""

    requests: int = 0
    refused: int = 0
    pushes: int = 0
    last_ms: int = 0


@dataclass
class RouteState:
    route: Route
    sessions: dict[str, Use] = field(default_factory=dict)
    # Commits of the packs pushed through it: proves a later push's fast-forward.
    commits: push.KnownCommits = field(default_factory=push.KnownCommits)


class CredentialService(Listener):
    def __init__(
        self,
        config: CredentialConfig,
        state_dir: str,
        network: NetworkService,
        sessions: SessionManager,
        ask_push: PushAsk,
        has_listeners: Callable[[str], bool],
    ) -> None:
        self.config = config
        self.route_port = config.port
        self.network = network
        self.sessions = sessions
        self.ask_push = ask_push
        self.has_listeners = has_listeners
        self.sources = Sources(config.sources, state_dir)
        self.state = {name: RouteState(r) for name, r in config.routes.items()}
        self._tls: dict[str, ssl.SSLContext] = {}
        # Per session while a push of it is held; gone with the last holder.
        self._held: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    # --- the network service's Listener ---------------------------------------------------

    def port(self) -> int | None:
        return self.config.port if self.config.routes else None

    def environment(self, session_id: str) -> dict[str, str]:
        """git pointed at its routes (insteadOf, no proxy for them), each http route's
        variables, and loopback left out of the proxy."""
        env: dict[str, str] = {}
        if not self.config.routes:
            return env
        pairs: list[tuple[str, str]] = []
        for route in self.config.routes.values():
            url = paths.route_url(route, self.config.port)
            if route.kind == "git":
                pairs.append((f"url.{url}.insteadOf", route.upstream))
            for name, value in route.env.items():
                env[name] = value.replace("{url}", url)
        pairs.append((f"http.http://127.0.0.1:{self.config.port}/.proxy", ""))
        add_git_config(env, pairs)
        for name in ("NO_PROXY", "no_proxy", "npm_config_noproxy"):
            env[name] = "127.0.0.1,localhost"
        # pip sends everything to an explicit --proxy, NO_PROXY or not; without it, it
        # takes HTTPS_PROXY and NO_PROXY from the environment like the rest.
        env["PIP_PROXY"] = ""
        env["AGENTD_CREDENTIAL_ROUTES"] = " ".join(
            f"{r.name}={paths.route_url(r, self.config.port)}" for r in self.config.routes.values()
        )
        return env

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decider: Decider
    ) -> None:
        await RouteConnection(reader, writer, decider, self).run()

    # --- what the relay asks (on the proxy's loop) ----------------------------------------

    def route(self, name: str) -> Route | None:
        return self.config.routes.get(name)

    async def secret(self, route: Route, session_id: str) -> Secret:
        try:
            owner = self.sessions.get(session_id).owner_uid
        except Exception:
            raise SourceError("the session is closed") from None
        try:
            return await asyncio.get_running_loop().run_in_executor(
                None, self.sources.get, route.source, owner
            )
        except SourceError:
            raise
        except Exception as exc:  # a source that fails refuses the request, never crashes
            log.exception("credential source %s failed", route.source)
            raise SourceError(f"source {route.source} failed ({type(exc).__name__})") from None

    def tls(self, route: Route) -> ssl.SSLContext:
        with self._lock:
            ctx = self._tls.get(route.name)
            if ctx is None:
                ctx = ssl.create_default_context(cafile=route.ca_file or None)
                self._tls[route.name] = ctx
            return ctx

    def holding(self, session_id: str) -> asyncio.Lock:
        with self._lock:
            lock = self._held.get(session_id)
            if lock is None:
                lock = self._held[session_id] = asyncio.Lock()
            return lock

    def _use(self, route: Route, session_id: str) -> Use:
        """The session's use of the route (the oldest sessions forgotten past a few
        hundred); call with the lock held."""
        sessions = self.state[route.name].sessions
        use = sessions.get(session_id)
        if use is None:
            use = sessions[session_id] = Use()
            while len(sessions) > SESSIONS_KEPT:
                sessions.pop(next(iter(sessions)))
        return use

    def used(self, session_id: str, route: Route, status: int) -> None:
        if status == 401:  # the secret may have changed: read it again next time
            self.sources.forget(route.source)
        with self._lock:
            use = self._use(route, session_id)
            use.requests += 1
            use.refused += status in (401, 403)
            use.last_ms = int(time.time() * 1000)

    def known_commits(self, route: Route) -> push.KnownCommits:
        return self.state[route.name].commits

    async def push_allowed(
        self,
        session_id: str,
        route: Route,
        path: str,
        commands: push.Commands,
        proven: set[str],
        advertised: push.Advertised | None,
    ) -> tuple[bool, str]:
        decided = self._push_decided(session_id, route, path, commands, proven, advertised)
        return await self.network.proxy_loop.on_daemon(decided)

    # --- on the daemon's loop -------------------------------------------------------------

    def _kind(self, update: push.RefUpdate, proven: set[str]) -> str:
        if update.deletion:
            return "delete"
        if update.creation:
            return "create"
        return "fast-forward" if update.ref in proven else "force (not a proven fast-forward)"

    def _guarded(self, update: push.RefUpdate, advertised: push.Advertised | None) -> str:
        """Why an update is a push to a protected ref ("" if not): by what the server
        would update; when its advertisement could not be read, every update is."""
        if advertised is None:
            return "protected: the server's refs could not be read"
        return advertised.guarded(update, self.config.protected_refs)

    async def _push_decided(
        self,
        session_id: str,
        route: Route,
        path: str,
        commands: push.Commands,
        proven: set[str],
        advertised: push.Advertised | None,
    ) -> tuple[bool, str]:
        repository = f"https://{route.netloc}{path.removesuffix('/git-receive-pack')}"
        guarded = {u.ref: self._guarded(u, advertised) for u in commands.updates}
        updates: list[PushedRef] = [
            {
                "ref": u.ref,
                "old": u.old,
                "new": u.new,
                "kind": self._kind(u, proven),
                "protected": bool(guarded[u.ref]),
            }
            for u in commands.updates
        ]
        asks = [u for u in updates if u["protected"] or u["kind"] not in ("create", "fast-forward")]
        call = self.network.running_call(session_id)
        tool_use_id = call.tool_use_id if call else ""
        if not asks:
            allowed, who = True, f"the session's rules (route {route.name})"
        elif not self.has_listeners(session_id):
            allowed, who = False, "refused: this push asks a person and none is attached"
        else:
            reasons = [
                f"{u['ref']}: "
                + (guarded[u["ref"]] if u["protected"] else u["kind"])
                + f" (route {route.name} asks a person for these)"
                for u in asks
            ]
            tool_input = {"repository": repository, "route": route.name, "updates": updates}
            allowed, who = await self.ask_push(session_id, tool_use_id, tool_input, reasons)
        with self._lock:
            self._use(route, session_id).pushes += 1
        try:
            self.sessions.log(session_id).emit(
                GitPush(
                    tool_use_id=tool_use_id,
                    route=route.name,
                    repository=repository,
                    updates=updates,
                    allowed=allowed,
                    decided_by=who,
                )
            )
        except Exception:  # the session closed meanwhile: the push is refused below anyway
            log.warning("session %s: the push could not be journaled", session_id)
            return False, "refused: the session is closed"
        log.info(
            "session %s: push to %s %s by %s",
            session_id,
            repository,
            "allowed" if allowed else "refused",
            who,
        )
        return allowed, who

    # --- what people see -------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """For ListCredentials: sources and routes, never a secret."""
        with self._lock:
            routes = [
                {
                    "name": st.route.name,
                    "kind": st.route.kind,
                    "upstream": st.route.upstream,
                    "source": st.route.source,
                    "header": st.route.header,
                    "url": paths.route_url(st.route, self.config.port),
                    "env": sorted(st.route.env),
                    "sessions": {sid: vars(use).copy() for sid, use in st.sessions.items()},
                }
                for st in self.state.values()
            ]
        sources = [
            {"name": s.name, "kind": s.kind, "where": s.where} for s in self.config.sources.values()
        ]
        return {
            "sources": sources,
            "routes": routes,
            "protected_refs": list(self.config.protected_refs),
        }
