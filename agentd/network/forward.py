"""Forward requests (`GET http://host/path` sent to the proxy itself).

Every request on a kept-alive connection is parsed (h11) and decided by its own host;
the origin gets each request framed again by h11, so what it reads is exactly the
request that was decided: bytes the client sent beyond it (a pipelined request, a
body smuggled past one framing and not the other) are parsed as the next request and
decided in turn, never relayed unread. A request carrying both Content-Length and
Transfer-Encoding is refused. One upstream connection is kept while requests name the
same host and port; a request for another host gets its own decision and connection.
CONNECT is taken only as a connection's first request (http_proxy.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

import h11

from agentd.foundation import metrics
from agentd.network.connection import CHUNK, Connector, Decider, Request
from agentd.network.http_parts import (
    HEAD_LIMIT,
    decided,
    http_answer,
    split_authority,
)

# Hop-by-hop headers and those a client meant for the proxy: never passed on.
HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
# How long a kept-alive connection may wait for its next request, or a body its next
# bytes, before the proxy ends it.
IDLE_SECONDS = 120.0

CONNECT_FIRST = "agentd's proxy: send CONNECT as a new connection's first request\n"

Headers = list[tuple[bytes, bytes]]


class _Gone(Exception):
    """The upstream ended before its answer did."""


@dataclass(slots=True)
class _Upstream:
    host: str
    port: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection

    def close(self) -> None:
        self.writer.close()


@dataclass(slots=True)
class _Counts:
    sent: int = 0
    received: int = 0


def _out(conn: h11.Connection, event: h11.Event) -> bytes:
    return conn.send(event) or b""


async def _next(
    conn: h11.Connection, reader: asyncio.StreamReader, seconds: float | None
) -> object:
    """The next event `conn` parses from `reader` (the end of the stream is one too)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        if seconds is None:
            data = await reader.read(CHUNK)
        else:
            # asyncio.timeout, not wait_for: no task per read.
            async with asyncio.timeout(seconds):
                data = await reader.read(CHUNK)
        conn.receive_data(data)


def destination(request: h11.Request) -> tuple[Request, bytes, Headers] | str:
    """Where a forward request goes, its target and headers as the origin gets them;
    or why it is refused. The Host header must name the same host as the request
    line: a client may not have the proxy decide on one host while the origin serves
    another."""
    target = request.target.decode("latin-1")
    try:
        url = urlsplit(target)
        port = url.port or 80
    except ValueError:
        return "agentd's proxy: malformed request target\n"
    if url.scheme != "http" or not url.hostname:
        return "agentd's proxy takes http:// URLs and CONNECT (https goes through CONNECT)\n"
    host = url.hostname
    kept: Headers = []
    framing: set[bytes] = set()
    host_given = False
    for name, value in request.headers.raw_items():
        key = name.lower()
        if key in HOP:
            continue
        if key in (b"content-length", b"transfer-encoding"):
            framing.add(key)
        if key == b"host":
            host_given = True
            given = value.decode("latin-1")
            where = split_authority(given, 80)
            if where is None or where[0].lower() != host.lower() or where[1] != port:
                return (
                    f"agentd's proxy: the Host header ({given}) names another host than the "
                    f"request line ({url.netloc}); refused\n"
                )
        kept.append((name, value))
    if len(framing) > 1:
        return (
            "agentd's proxy: a request with both Content-Length and Transfer-Encoding is "
            "ambiguous; refused (send one of them)\n"
        )
    if not host_given:
        kept.insert(0, (b"Host", url.netloc.encode("latin-1")))
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    return Request(host, port, "HTTP"), path.encode("latin-1"), kept


def _passed(headers: h11._headers.Headers) -> Headers:
    return [(k, v) for k, v in headers.raw_items() if k.lower() not in HOP]


async def serve(
    head: bytes,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector,
) -> None:
    """Forward requests on one client connection, `head` (the first request's head)
    already read, until the client or the proxy ends it."""
    client = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
    client.receive_data(head)
    upstream: _Upstream | None = None
    counts = _Counts()
    metrics.NETWORK_OPEN.inc()
    try:
        while True:
            try:
                event = await _next(client, reader, IDLE_SECONDS)
            except h11.RemoteProtocolError as exc:
                status = HTTPStatus(exc.error_status_hint)
                status_line = f"{status.value} {status.phrase}"
                writer.write(http_answer(status_line, f"agentd's proxy: {exc}; refused\n"))
                return
            except TimeoutError:
                return
            if not isinstance(event, h11.Request):
                return  # the client ended the connection
            if event.method == b"CONNECT":
                writer.write(http_answer("400 Bad Request", CONNECT_FIRST))
                return
            where = destination(event)
            if isinstance(where, str):
                writer.write(http_answer("400 Bad Request", where))
                return
            request, target, headers = where
            refused = decider.carries(request, [target, *(v for _, v in headers)])
            if refused is not None:
                writer.write(http_answer("403 Forbidden", refused))
                return
            if upstream is not None and (upstream.host, upstream.port) != (
                request.host,
                request.port,
            ):
                upstream.close()
                upstream = None
            if upstream is None:
                streams = await decided(request, writer, decider, connect)
                if streams is None:
                    return
                upstream = _Upstream(
                    request.host, request.port, *streams, h11.Connection(h11.CLIENT)
                )
            sent = h11.Request(method=event.method, target=target, headers=headers)
            upstream.writer.write(_out(upstream.conn, sent))
            if not await _exchange(client, reader, writer, upstream, counts):
                return
            if upstream.conn.our_state is h11.DONE and upstream.conn.their_state is h11.DONE:
                upstream.conn.start_next_cycle()
            else:
                upstream.close()
                upstream = None
            client.start_next_cycle()
    finally:
        metrics.NETWORK_OPEN.dec()
        if upstream is not None:
            upstream.close()
        decider.carried(counts.sent, counts.received)


async def _exchange(
    client: h11.Connection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream: _Upstream,
    counts: _Counts,
) -> bool:
    """One request's body to the upstream while its answer comes back; True when both
    ended cleanly and the client's connection may carry another request."""
    answered = broken = False
    try:
        async with asyncio.TaskGroup() as group:
            body = group.create_task(_send_body(client, reader, upstream, counts))
            answered = await _send_answer(client, writer, upstream, counts)
            if not body.done():
                body.cancel()  # answered before the body ended: the connection ends
    except* (OSError, h11.ProtocolError, TimeoutError, _Gone):
        if not answered and client.our_state is h11.SEND_RESPONSE:
            body_text = f"agentd's proxy: {upstream.host}:{upstream.port} ended without an answer\n"
            writer.write(http_answer("502 Bad Gateway", body_text))
        broken = True
    return not broken and client.our_state is h11.DONE and client.their_state is h11.DONE


async def _send_body(
    client: h11.Connection, reader: asyncio.StreamReader, upstream: _Upstream, counts: _Counts
) -> None:
    while True:
        event = await _next(client, reader, IDLE_SECONDS)
        if isinstance(event, h11.Data):
            counts.sent += len(event.data)
            upstream.writer.write(_out(upstream.conn, h11.Data(data=event.data)))
            await upstream.writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            upstream.writer.write(_out(upstream.conn, h11.EndOfMessage()))
            await upstream.writer.drain()
            return
        else:
            raise ConnectionResetError("the client ended its request early")


async def _send_answer(
    client: h11.Connection, writer: asyncio.StreamWriter, upstream: _Upstream, counts: _Counts
) -> bool:
    """The upstream's answer to the client; True once it ended."""
    while True:
        event = await _next(upstream.conn, upstream.reader, None)
        if isinstance(event, h11.InformationalResponse):
            if event.status_code != 101:
                informational = h11.InformationalResponse(
                    status_code=event.status_code, headers=_passed(event.headers)
                )
                writer.write(_out(client, informational))
            continue
        if isinstance(event, h11.Response):
            response = h11.Response(
                status_code=event.status_code,
                headers=_passed(event.headers),
                reason=event.reason,
            )
            writer.write(_out(client, response))
        elif isinstance(event, h11.Data):
            counts.received += len(event.data)
            writer.write(_out(client, h11.Data(data=event.data)))
            await writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            writer.write(_out(client, h11.EndOfMessage()))
            await writer.drain()
            return True
        else:
            raise _Gone
