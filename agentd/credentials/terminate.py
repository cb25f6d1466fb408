"""A CONNECT to a host some masked credential goes to, terminated: the upstream's real
certificate verified first (an invalid one is refused with a 502 before anything is
said to the sandbox), then TLS with the sandbox under a leaf of the session's own CA
(session_ca.py), then HTTP/1.1 (h11 on both sides; ALPN offers nothing else, so HTTP/2
clients fall back to it) with each request's placeholders swapped for their real
values (injection.py) in its target, headers and body, and each answer's real values
swapped back.

A request carrying the placeholder of an entry that does not go to this host is
answered 403 naming the entry, and never forwarded: a body is held up to
BODY_HELD_BYTES before anything of the request goes; past that it streams, and a
foreign placeholder found later cuts the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import h11

from agentd.credentials.http import HOP, next_event, request_body
from agentd.credentials.injection import Injection, OutStream, Swap
from agentd.network.connection import CHUNK, Answers, Request

BODY_HELD_BYTES = 1024 * 1024
HANDSHAKE_SECONDS = 30.0
# Request headers never passed on (hop-by-hop); Accept-Encoding is ours (identity:
# a compressed answer could carry a real value unseen).
_DROPPED = HOP - {b"host"}


@dataclass
class Reports:
    """What the connection tells the service (on the proxy's loop, not awaited)."""

    used: Callable[[str], None]  # an entry's placeholder was swapped on a request
    refused: Callable[[Swap, str], None]  # a foreign placeholder, where ("host:port")
    failed: Callable[[str], None]  # the TLS could not be made, and why (one line)


class _Cut(Exception):
    """The connection ends here (refused mid-stream, or a side broke off)."""


async def terminate(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    answers: Answers,
    request: Request,
    server: ssl.SSLContext,
    verify: ssl.SSLContext,
    injection: Injection,
    reports: Reports,
) -> None:
    """The CONNECT's answer (in its protocol's `answers`) and everything after it."""
    where = f"{request.host}:{request.port}"
    up_reader, up_writer = upstream
    try:
        async with asyncio.timeout(HANDSHAKE_SECONDS):
            await up_writer.start_tls(verify, server_hostname=request.host)
    except (ssl.SSLError, OSError, TimeoutError) as exc:
        why = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
        line = f"{where}'s certificate could not be verified ({why}); refused"
        reports.failed(line)
        writer.write(answers.failed(line))
        up_writer.close()
        return
    writer.write(answers.ok)
    try:
        await writer.drain()
        async with asyncio.timeout(HANDSHAKE_SECONDS):
            await writer.start_tls(server)
    except (ssl.SSLError, OSError, TimeoutError) as exc:
        reports.failed(
            f"the client refused agentd's certificate for {where} ({exc.__class__.__name__}): "
            "it pins certificates or does not read SSL_CERT_FILE; its masked credential "
            "cannot be used"
        )
        up_writer.close()
        return
    try:
        await _Exchange(reader, writer, up_reader, up_writer, injection, reports, where).run()
    finally:
        up_writer.close()


class _Exchange:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        injection: Injection,
        reports: Reports,
        where: str,
    ) -> None:
        self.reader, self.writer = reader, writer
        self.up_reader, self.up_writer = up_reader, up_writer
        self.injection = injection
        self.reports = reports
        self.where = where
        self.server = h11.Connection(h11.SERVER)
        self.client = h11.Connection(h11.CLIENT)

    async def run(self) -> None:
        with contextlib.suppress(
            _Cut, OSError, TimeoutError, ssl.SSLError, h11.ProtocolError, zlib.error
        ):
            while True:
                event = await next_event(self.server, self.reader)
                if not isinstance(event, h11.Request):
                    return
                if not await self._exchange(event):
                    return
                if self.server.our_state is not h11.DONE or self.client.our_state is not h11.DONE:
                    return
                if self.server.their_state is not h11.DONE:
                    return
                if self.client.their_state is not h11.DONE:
                    return
                self.server.start_next_cycle()
                self.client.start_next_cycle()

    async def _down(self, event: h11.Event) -> None:
        data = self.server.send(event)
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def _up(self, event: h11.Event) -> None:
        data = self.client.send(event)
        if data:
            self.up_writer.write(data)
            await self.up_writer.drain()

    async def _refuse(self, swap: Swap) -> None:
        self.reports.refused(swap, self.where)
        hosts = ", ".join(swap.hosts) or "no host"
        body = (
            f"agentd refused this request to {self.where}: it carries the placeholder of "
            f"the masked credential {swap.label}, which goes only to {hosts}.\n"
        ).encode()
        if self.server.our_state is h11.SEND_RESPONSE:
            headers = [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
                ("X-Agentd-Refused", swap.label),
            ]
            await self._down(h11.Response(status_code=403, headers=headers))
            await self._down(h11.Data(data=body))
            await self._down(h11.EndOfMessage())

    async def _body(self) -> tuple[bytes, bool]:
        """The request's body up to BODY_HELD_BYTES (more may follow: False)."""
        body = await request_body(self.server, self.reader, self._down, BODY_HELD_BYTES)
        if body is None:
            raise _Cut
        return body

    async def _exchange(self, request: h11.Request) -> bool:
        """One request and its answer; False: the connection ends."""
        injection = self.injection
        foreign = injection.foreign(bytes(request.target))
        used: list[Swap] = []
        headers: list[tuple[bytes, bytes]] = []
        # As the client spelled them (a server may care about a header's case).
        for key, value in request.headers.raw_items():
            if key.lower() in _DROPPED:
                continue
            swapped_value, swapped, refused = injection.header(bytes(key), bytes(value))
            foreign = foreign or refused
            used += swapped
            headers.append((bytes(key), swapped_value))
        headers.append((b"accept-encoding", b"identity"))
        body, complete = await self._body()
        if foreign is None and complete:
            foreign = injection.foreign(body)
        if foreign is not None:
            await self._refuse(foreign)
            return False
        target, swapped = injection.inject(bytes(request.target))
        used += swapped
        await self._up(h11.Request(method=request.method, target=target, headers=headers))
        stream = OutStream(injection)
        while True:
            out, refused = stream.feed(body)
            if refused is not None:
                self.reports.refused(refused, self.where)
                raise _Cut  # part of the body went: only cutting stops the rest
            if out:
                await self._up(h11.Data(data=out))
            if complete:
                break
            body, complete = await self._body()
        rest = stream.flush()
        if rest:
            await self._up(h11.Data(data=rest))
        await self._up(h11.EndOfMessage())
        for label in dict.fromkeys(s.label for s in [*used, *stream.used]):
            self.reports.used(label)
        return await self._answer()

    async def _answer(self) -> bool:
        masker = self.injection.masker()
        # An answer compressed although we asked for identity is inflated here (and
        # passed on plain, chunked): its bytes are masked like any other's.
        inflater: zlib._Decompress | None = None
        while True:
            event = await next_event(self.client, self.up_reader)
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                raw = list(event.headers.raw_items())
                encoding = b"".join(v for k, v in raw if k.lower() == b"content-encoding")
                if encoding.strip().lower() in _INFLATED:
                    inflater = zlib.decompressobj(wbits=47)  # gzip or zlib, by its header
                    dropped = (b"content-encoding", b"content-length")
                    raw = [(k, v) for k, v in raw if k.lower() not in dropped]
                headers = [
                    (bytes(k), masker.mask(bytes(v)))
                    for k, v in raw
                    if k.lower() not in _DROPPED or k.lower() == b"connection"
                ]
                reason = masker.mask(bytes(event.reason))
                await self._down(
                    h11.Response(status_code=event.status_code, headers=headers, reason=reason)
                )
            elif isinstance(event, h11.Data):
                for part in _inflated(inflater, bytes(event.data)):
                    out = masker.feed(part)
                    if out:
                        await self._down(h11.Data(data=out))
            elif isinstance(event, h11.EndOfMessage):
                if inflater is not None:
                    rest = masker.feed(inflater.flush()) + masker.flush()
                else:
                    rest = masker.flush()
                if rest:
                    await self._down(h11.Data(data=rest))
                await self._down(h11.EndOfMessage())
                return True
            else:
                return False


_INFLATED = (b"gzip", b"x-gzip", b"deflate")


def _inflated(inflater: zlib._Decompress | None, data: bytes) -> Iterator[bytes]:
    """`data` as it reads inflated, in pieces of at most CHUNK, each passed on before
    the next is made (a small compressed chunk may stand for a great deal)."""
    if inflater is None:
        yield data
        return
    while data:
        yield inflater.decompress(data, CHUNK)
        data = inflater.unconsumed_tail
