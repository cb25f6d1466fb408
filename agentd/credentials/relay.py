"""One sandbox connection to the credential routes: HTTP/1.1 requests (h11 on both
sides), each checked against its route (paths.py), decided for the session, forwarded
over TLS to the route's upstream with the secret added, and answered with the secret
masked out of every byte that comes back.

The sandbox never holds the secret: it is added to the request here, never to a
redirect (a Location leaving the route is refused, one inside it is mapped back onto
the route), and any echo of it in a response's headers or body is replaced with `*`s of
the same length (Content-Length stays true; upstream compression is turned off so the
bytes are the plain ones). A git push is held until its ref updates are read (push.py),
the upstream's own advertisement is read (which refs are protected by what the server
would update: a symbolic ref or alias of a protected ref), and a person has answered
when they must.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import NoReturn, Protocol

import h11

from agentd.credentials import paths, push, push_http
from agentd.credentials.config import Route
from agentd.credentials.http import (
    HOP,
    Held,
    Masker,
    Upstream,
    connect,
    next_event,
    request_body,
    response_headers,
    rewritable,
)
from agentd.credentials.sources import Secret, SourceError
from agentd.network.connection import Decider, Request, refusal_body

# A push's body read before it is forwarded, to prove fast-forwards; a bigger push still
# has its commands read, and its non-creating updates ask.
PUSH_HELD_BYTES = 64 * 1024 * 1024
# Other request bodies are streamed once this much is buffered.
BODY_HELD_BYTES = 1024 * 1024


class Routes(Protocol):
    """What the relay needs from the service (service.py)."""

    route_port: int

    def route(self, name: str) -> Route | None: ...

    async def secret(self, route: Route, session_id: str) -> Secret: ...

    def tls(self, route: Route) -> ssl.SSLContext: ...

    async def push_allowed(
        self,
        session_id: str,
        route: Route,
        path: str,
        commands: push.Commands,
        proven: set[str],
        advertised: push.Advertised | None,
    ) -> tuple[bool, str]: ...

    def used(self, session_id: str, route: Route, status: int) -> None: ...

    def known_commits(self, route: Route) -> push.KnownCommits: ...

    def holding(self, session_id: str) -> asyncio.Lock: ...


class _Stale(Exception):
    """A kept upstream connection answered nothing: it was closed while idle."""


class _Answered(Exception):
    """The request was answered here (refused or failed); go on with the next."""


class RouteConnection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        decider: Decider,
        routes: Routes,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.decider = decider
        self.routes = routes
        self.server = h11.Connection(h11.SERVER)
        self.upstream: Upstream | None = None

    async def run(self) -> None:
        try:
            while True:
                try:
                    event = await next_event(self.server, self.reader)
                except h11.RemoteProtocolError:
                    await self._answer(400, "agentd's route: malformed HTTP request\n")
                    return
                if not isinstance(event, h11.Request):
                    return  # closed
                with contextlib.suppress(_Answered):
                    await self._request(event)
                if self.server.our_state is not h11.DONE or (
                    self.server.their_state is not h11.DONE
                ):
                    return
                self.server.start_next_cycle()
        except (OSError, TimeoutError, h11.LocalProtocolError, h11.RemoteProtocolError):
            pass
        finally:
            self._drop_upstream()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.drain()
            self.writer.close()

    # --- the sandbox's side ------------------------------------------------------------

    async def _send(self, event: h11.Event) -> None:
        data = self.server.send(event)
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def _answer(self, status: int, body: str) -> None:
        """An answer of the route's own: plain text, never the secret."""
        data = body.encode()
        headers = [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(data))),
            ("X-Agentd-Route", "refused" if status in (403, 404) else "error"),
        ]
        if self.server.our_state is h11.SEND_RESPONSE:
            await self._send(h11.Response(status_code=status, headers=headers))
            await self._send(h11.Data(data=data))
            await self._send(h11.EndOfMessage())

    async def _refuse(self, status: int, body: str) -> NoReturn:
        # The request's body is not wanted: the connection closes after the answer.
        await self._answer(status, body)
        raise _Answered

    async def _body(self, limit: int) -> tuple[bytes, bool]:
        """The request body, up to `limit` bytes (more may follow: False)."""
        body = await request_body(self.server, self.reader, self._send, limit)
        if body is None:
            raise OSError("the request ended early")
        return body

    async def _request(self, request: h11.Request) -> None:
        target = request.target.decode("latin-1")
        hosts = [v.decode("latin-1") for k, v in request.headers if k == b"host"]
        if len(hosts) != 1 or not paths.host_allowed(hosts[0], self.routes.route_port):
            await self._refuse(
                403, f"agentd's route: ask it as 127.0.0.1:{self.routes.route_port}\n"
            )
        if not target.startswith("/"):
            await self._refuse(
                403, "agentd's route takes paths only (/<route>/...), not absolute URLs\n"
            )
        name = paths.route_name(target)
        route = self.routes.route(name) if name else None
        if route is None:
            await self._refuse(404, f"agentd has no credential route named {name!r}\n")
        try:
            upstream_path = paths.upstream_target(route, target)
        except paths.Refused as exc:
            await self._refuse(403, f"agentd's route {route.name}: {exc}; refused\n")
        wanted = Request(route.host, route.port, f"route {route.name}")
        verdict = await self.decider.decide(wanted)
        if not verdict.allowed:
            await self._refuse(403, refusal_body(wanted, verdict))
        try:
            secret = await self.routes.secret(route, self.decider.session_id)
        except SourceError as exc:
            await self._refuse(502, f"agentd's route {route.name}: its credential: {exc}\n")
        method = request.method.decode("ascii", "replace")
        is_push = False
        if route.kind == "git":
            service = paths.git_service(method, upstream_path)
            if service is None:
                await self._refuse(
                    403,
                    f"agentd's git route {route.name} carries git's smart http only "
                    "(GET info/refs, POST git-upload-pack or git-receive-pack)\n",
                )
            is_push = service == "receive-pack"
        elif paths.git_service(method, upstream_path) == "receive-pack":
            # A push through a header-adding route would go unread: git routes only.
            await self._refuse(403, f"agentd's route {route.name} is not a git route; no pushes\n")
        if is_push:
            # One held push per session at a time: its memory is bounded by the session,
            # not by how many connections it opens.
            async with self.routes.holding(self.decider.session_id):
                body, complete = await self._body(PUSH_HELD_BYTES)
                advertised = await self._advertised(route, verdict.addresses, secret, upstream_path)
                refused = await self._push_check(
                    route, request, upstream_path, body, complete, advertised
                )
            if refused is not None:
                while not complete:
                    more, complete = await self._body(BODY_HELD_BYTES)
                await self._push_answer(refused)
                self.routes.used(self.decider.session_id, route, 200)
                return
        else:
            body, complete = await self._body(BODY_HELD_BYTES)
        headers = self._headers(route, request, secret)
        masker = Masker(secret.masks(route))
        out = h11.Request(method=request.method, target=upstream_path.encode(), headers=headers)
        rewrite = route.kind == "http" and method != "HEAD"
        for attempt in (1, 2):
            reused = self._reusable(route)
            try:
                upstream = await self._connect(route, verdict.addresses)
            except OSError as exc:
                shown = masker.mask(str(exc).encode()).decode()
                await self._answer(
                    502, f"agentd's route {route.name} could not reach {route.netloc}: {shown}\n"
                )
                return  # a body not read yet closes the connection (run)
            try:
                await self._up(upstream, out)
                if body:
                    await self._up(upstream, h11.Data(data=body))
                while not complete:
                    more, complete = await self._body(BODY_HELD_BYTES)
                    if more:
                        await self._up(upstream, h11.Data(data=more))
                await self._up(upstream, h11.EndOfMessage())
                status = await self._response(
                    route, upstream, masker, stale_ok=reused, rewrite=rewrite
                )
            except (_Stale, OSError) as exc:
                # A kept connection the upstream had closed meanwhile: once more, anew
                # (the whole body is still here: only a complete one is ever resent).
                self._drop_upstream()
                fresh = isinstance(exc, _Stale) or reused
                if attempt == 1 and complete and fresh and self._unanswered():
                    continue
                if not self._unanswered():
                    raise
                await self._answer(
                    502, f"agentd's route {route.name}: the upstream closed the connection\n"
                )
                return
            self.routes.used(self.decider.session_id, route, status)
            return

    def _unanswered(self) -> bool:
        return self.server.our_state is h11.SEND_RESPONSE

    def _reusable(self, route: Route) -> bool:
        kept = self.upstream
        return kept is not None and kept.route == route.name and kept.conn.our_state is h11.IDLE

    def _headers(
        self, route: Route, request: h11.Request, secret: Secret
    ) -> list[tuple[bytes, bytes]]:
        mine = route.header.lower().encode()
        kept = [(k, v) for k, v in request.headers if k not in HOP and k != mine and k != b"cookie"]
        return [
            (b"Host", route.netloc.encode()),
            *kept,
            (b"Accept-Encoding", b"identity"),
            (route.header.encode(), secret.header_value(route).encode()),
        ]

    # --- pushes --------------------------------------------------------------------------

    async def _push_check(
        self,
        route: Route,
        request: h11.Request,
        path: str,
        body: bytes,
        complete: bool,
        advertised: push.Advertised | None,
    ) -> tuple[push.Commands | None, str] | None:
        """None when the push may go on; else what to answer."""
        encoding = b"".join(v for k, v in request.headers if k == b"content-encoding")
        read = push.read(encoding, body, complete, self.routes.known_commits(route))
        if isinstance(read, str):
            return None, read
        commands, proven = read
        allowed, why = await self.routes.push_allowed(
            self.decider.session_id, route, path, commands, proven, advertised
        )
        return None if allowed else (commands, why)

    async def _advertised(
        self, route: Route, addresses: list[str], secret: Secret, path: str
    ) -> push.Advertised | None:
        """The upstream's receive-pack advertisement, asked just before the push goes on;
        None when it cannot be had or read."""
        request = push_http.advertisement_request(route, secret, path)
        if request is None:
            return None
        for attempt in (1, 2):
            reused = self._reusable(route)
            try:
                upstream = await self._connect(route, addresses)
                await self._up(upstream, request)
                await self._up(upstream, h11.EndOfMessage())
                status, body, reusable = await push_http.collected(upstream)
            except (OSError, TimeoutError, h11.ProtocolError):
                self._drop_upstream()
                if attempt == 1 and reused:
                    continue
                return None
            if not reusable:
                self._drop_upstream()
            return push.advertised(body) if status == 200 and body is not None else None
        return None

    async def _push_answer(self, refused: tuple[push.Commands | None, str]) -> None:
        commands, why = refused
        if commands is None:
            await self._answer(403, f"{why}\n")
            return
        for event in push_http.refusal(commands, why):
            await self._send(event)

    # --- the upstream's side -------------------------------------------------------------

    async def _connect(self, route: Route, addresses: list[str]) -> Upstream:
        if self._reusable(route) and self.upstream is not None:
            return self.upstream
        self._drop_upstream()
        self.upstream = await connect(route, addresses, self.routes.tls(route))
        return self.upstream

    def _drop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.writer.close()
            self.upstream = None

    async def _up(self, upstream: Upstream, event: h11.Event) -> None:
        data = upstream.conn.send(event)
        if data:
            upstream.writer.write(data)
            await upstream.writer.drain()

    async def _response(
        self,
        route: Route,
        upstream: Upstream,
        masker: Masker,
        stale_ok: bool = False,
        rewrite: bool = False,
    ) -> int:
        """The upstream's answer passed on, the secret masked; with `rewrite`, a textual
        body (an index page, a registry's JSON) has the upstream's absolute URLs under
        the prefix turned into the route's, so a client follows them through the route."""
        status = 502
        held: Held | None = None
        upstream_url = f"https://{route.netloc}{route.prefix}".encode()
        while True:
            try:
                event = await next_event(upstream.conn, upstream.reader)
            except (h11.RemoteProtocolError, OSError, TimeoutError) as exc:
                if stale_ok and not isinstance(exc, TimeoutError) and self._unanswered():
                    raise _Stale from None
                self._drop_upstream()
                if self.server.our_state is h11.SEND_RESPONSE:
                    await self._answer(
                        502, f"agentd's route {route.name}: the upstream broke off its answer\n"
                    )
                    return 502
                raise OSError("the upstream broke off") from None
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.ConnectionClosed) and stale_ok:
                raise _Stale
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = response_headers(route, event, masker, self.routes.route_port)
                if headers is None:
                    self._drop_upstream()
                    await self._answer(
                        502,
                        f"agentd's route {route.name}: the upstream "
                        "redirected outside the route; not followed\n",
                    )
                    raise _Answered
                reason = masker.mask(bytes(event.reason))
                head = h11.Response(status_code=status, headers=headers, reason=reason)
                if rewrite and rewritable(headers):
                    held = Held(head)
                else:
                    await self._send(head)
            elif isinstance(event, h11.Data):
                if held is not None and held.add(bytes(event.data)):
                    continue
                if held is not None:  # too big to rewrite: passed on as it came
                    await self._send(held.head)
                    data, held = held.data(), None
                    out = masker.feed(data)
                else:
                    out = masker.feed(bytes(event.data))
                if out:
                    await self._send(h11.Data(data=out))
            elif isinstance(event, h11.EndOfMessage):
                if held is not None:
                    body = held.data().replace(
                        upstream_url, paths.route_url(route, self.routes.route_port).encode()
                    )
                    body = masker.mask(body)
                    kept = [
                        (k, v)
                        for k, v in held.head.headers
                        if k not in (b"content-length", b"transfer-encoding")
                    ]
                    kept.append((b"content-length", str(len(body)).encode()))
                    await self._send(
                        h11.Response(status_code=status, headers=kept, reason=held.head.reason)
                    )
                    if body:
                        await self._send(h11.Data(data=body))
                else:
                    rest = masker.flush()
                    if rest:
                        await self._send(h11.Data(data=rest))
                await self._send(h11.EndOfMessage())
                if upstream.conn.our_state is h11.DONE and upstream.conn.their_state is h11.DONE:
                    upstream.conn.start_next_cycle()
                else:
                    self._drop_upstream()
                return status
            else:  # the upstream closed
                self._drop_upstream()
                raise OSError("the upstream closed")
