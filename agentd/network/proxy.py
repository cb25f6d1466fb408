"""The proxy's protocols: HTTP (CONNECT and forward requests) and SOCKS5, on sockets
the daemon bound inside a session's namespace (netns.listen).

Every new connection is decided by the `Decider` (rules by name, an ask, the address
guard) before anything is connected, and connected to an address the decision checked,
never to a name resolved again. CONNECT is tunnelled as is: no TLS interception. A
refusal is an answer the program shows: an HTTP 403 whose body names the host and the
rule that would allow it, or SOCKS5's "not allowed by ruleset".

Routes (issue 21: git-aware routes adding a token, header-adding routes) plug in as a
`Connector`: given the decision, it opens the upstream end; the default is plain TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

from agentd.foundation import metrics

log = logging.getLogger(__name__)

HEAD_LIMIT = 64 * 1024
CHUNK = 256 * 1024
HANDSHAKE_SECONDS = 30.0
CONNECT_SECONDS = 15.0
# Headers a client meant for the proxy, never passed on.
_PROXY_HEADERS = frozenset({b"proxy-connection", b"proxy-authorization", b"proxy-authenticate"})


@dataclass(frozen=True, slots=True)
class Request:
    """A connection asked for: where to, and how (for messages and routes)."""

    host: str
    port: int
    via: str  # "CONNECT", "HTTP" (a forward request) or "SOCKS5"


@dataclass(slots=True)
class Verdict:
    """A decision: allowed to one of `addresses` (checked), or refused and why."""

    allowed: bool
    addresses: list[str] = field(default_factory=list)
    reason: str = ""  # why refused, or the rule/person that allowed it
    # The allowedDomains entry that would allow it (shown in a refusal), if any could.
    hint: str = ""


class Decider:
    """Decides a connection; the service's (agentd/network/service.py)."""

    async def decide(self, request: Request) -> Verdict:  # pragma: no cover - interface
        raise NotImplementedError

    def carried(self, sent: int, received: int) -> None:
        """Bytes a connection carried, once it ended."""


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Connector = Callable[[Verdict, Request], Awaitable[Streams]]


async def tcp_connect(
    verdict: Verdict, request: Request
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The upstream end: the first checked address that answers."""
    failure: OSError | None = None
    for address in verdict.addresses:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(address, request.port, limit=CHUNK), CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as exc:
            failure = exc if isinstance(exc, OSError) else OSError(str(exc) or "timed out")
    raise failure or OSError("no address to connect to")


def refusal_body(request: Request, verdict: Verdict) -> str:
    """What a refused program shows: the host, why, and what would allow it."""
    lines = [f"agentd refused the connection to {request.host}:{request.port}: {verdict.reason}."]
    if verdict.hint:
        lines.append(
            f"To allow it, add {verdict.hint!r} to sandbox.network.allowedDomains "
            f"(or WebFetch(domain:{verdict.hint.split(':')[0]}) to the allow rules), "
            "or answer yes when agentd asks."
        )
    return "\n".join(lines) + "\n"


def _http_answer(status: str, body: str, extra: str = "") -> bytes:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + data


# Bytes queued for one side before the other side stops being read.
HIGH_WATER = 4 * 1024 * 1024


class _Half(asyncio.Protocol):
    """One side of a tunnel: what it receives is written to the other side at once;
    when the other side's buffer is full, this side stops being read until it drains."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Half | None = None
        self.count = 0
        self.done = done
        self.closed = False
        self.eof = False

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None and self.peer.transport is not None
        self.count += len(data)
        self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None:
            return False
        if peer.eof:
            # Both directions ended: close both (close() sends what is buffered first).
            peer.transport.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True  # half-closed: the other direction goes on

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        if (self.peer is None or self.peer.closed) and not self.done.done():
            self.done.set_result(None)


def _take_over(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, half: _Half) -> bytes:
    """Move a stream's transport to `half`; the bytes its reader had buffered beyond
    what the handshake read (a request body, an eager TLS hello) are returned."""
    # asyncio's or uvloop's (whose transports do not derive from asyncio.Transport).
    transport = cast(asyncio.Transport, writer.transport)
    # StreamReader keeps them in its (private) buffer; nothing else can hand them over.
    buffer: bytearray = vars(reader)["_buffer"]
    leftover = bytes(buffer)
    buffer.clear()
    half.transport = transport
    transport.set_protocol(half)
    transport.set_write_buffer_limits(high=HIGH_WATER)
    return leftover


async def relay(client: Streams, upstream: Streams, decider: Decider) -> None:
    """Bytes both ways, zero-await (each side's data written to the other as it comes,
    with back-pressure), until both sides are closed."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    near, far = _Half(done), _Half(done)
    near.peer, far.peer = far, near
    metrics.NETWORK_OPEN.inc()
    try:
        early_near = _take_over(client[0], client[1], near)
        early_far = _take_over(upstream[0], upstream[1], far)
        if early_near:
            near.data_received(early_near)
        if early_far:
            far.data_received(early_far)
        for half, reader in ((near, client[0]), (far, upstream[0])):
            assert half.transport is not None
            if reader.at_eof():
                half.eof_received()
            if half.transport.is_closing():
                half.connection_lost(None)
            elif not half.transport.is_reading():
                half.transport.resume_reading()
        await done
    finally:
        metrics.NETWORK_OPEN.dec()
        for half in (near, far):
            if half.transport is not None:
                half.transport.close()
        decider.carried(near.count, far.count)


def _split_authority(authority: str, default_port: int) -> tuple[str, int] | None:
    """host and port of `host:port` / `[v6]:port` / `host`; None if malformed."""
    try:
        parts = urlsplit("//" + authority)
        port = parts.port or default_port
        host = parts.hostname or ""
    except ValueError:
        return None
    if not host or any(c in authority for c in "/?#@ \t"):
        return None
    return host, port


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANDSHAKE_SECONDS)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
        return None


async def serve_http(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector = tcp_connect,
) -> None:
    """One client connection to the HTTP proxy: a CONNECT tunnel, or one forward
    request (its connection then carries that host's traffic only)."""
    try:
        head = await _read_head(reader)
        if head is None:
            return
        lines = head.split(b"\r\n")
        try:
            method, target, version = lines[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            writer.write(_http_answer("400 Bad Request", "agentd's proxy: malformed request\n"))
            return
        if method == "CONNECT":
            where = _split_authority(target, 443)
            if where is None or "[" in target and ":" not in where[0]:
                writer.write(_http_answer("400 Bad Request", "CONNECT needs host:port\n"))
                return
            request = Request(where[0], where[1], "CONNECT")
            upstream = await _decided(request, writer, decider, connect)
            if upstream is None:
                return
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await relay((reader, writer), upstream, decider)
            return
        forward = _forward(method, target, version, lines[1:])
        if isinstance(forward, str):
            writer.write(_http_answer("400 Bad Request", forward))
            return
        request, rewritten = forward
        upstream = await _decided(request, writer, decider, connect)
        if upstream is None:
            return
        upstream[1].write(rewritten)
        await relay((reader, writer), upstream, decider)
    except (OSError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(OSError, ConnectionError):
            await writer.drain()
        writer.close()


def _forward(
    method: str, target: str, version: str, header_lines: list[bytes]
) -> tuple[Request, bytes] | str:
    """A forward request's destination and its head as the origin gets it; or why not.
    The Host header must name the same host as the request line: a client may not
    have the proxy decide on one host while the origin serves another."""
    try:
        url = urlsplit(target)
    except ValueError:
        return "agentd's proxy: malformed request target\n"
    if url.scheme != "http" or not url.hostname:
        return "agentd's proxy takes http:// URLs and CONNECT (https goes through CONNECT)\n"
    try:
        port = url.port or 80
    except ValueError:
        return "agentd's proxy: malformed port\n"
    host = url.hostname
    kept: list[bytes] = []
    host_headers: list[str] = []
    for line in header_lines:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            return "agentd's proxy: malformed header\n"
        key = name.strip().lower()
        if key in _PROXY_HEADERS:
            continue
        if key == b"host":
            host_headers.append(value.strip().decode("latin-1"))
        kept.append(line)
    for given in host_headers:
        where = _split_authority(given, 80)
        if where is None or where[0].lower() != host.lower() or where[1] != port:
            return (
                f"agentd's proxy: the Host header ({given}) names another host than the "
                f"request line ({url.netloc}); refused\n"
            )
    if not host_headers:
        kept.insert(0, f"Host: {url.netloc}".encode("latin-1"))
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    first = f"{method} {path} {version}".encode("latin-1")
    return Request(host, port, "HTTP"), b"\r\n".join([first, *kept]) + b"\r\n\r\n"


async def _decided(
    request: Request,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """The upstream end of an allowed request; None once a refusal was answered."""
    verdict = await decider.decide(request)
    if not verdict.allowed:
        extra = f"X-Agentd-Refused: {request.host}:{request.port}\r\n"
        writer.write(_http_answer("403 Forbidden", refusal_body(request, verdict), extra))
        return None
    try:
        return await connect(verdict, request)
    except OSError as exc:
        body = f"agentd's proxy could not reach {request.host}:{request.port}: {exc}\n"
        writer.write(_http_answer("502 Bad Gateway", body))
        return None


# SOCKS5 (RFC 1928), CONNECT only, no authentication: the namespace is the session's.
SOCKS_OK = 0
SOCKS_FAILURE = 1
SOCKS_NOT_ALLOWED = 2
SOCKS_HOST_UNREACHABLE = 4
SOCKS_COMMAND_UNSUPPORTED = 7
SOCKS_ADDRESS_UNSUPPORTED = 8


def _socks_reply(code: int) -> bytes:
    return struct.pack("!BBBB4sH", 5, code, 0, 1, b"\0\0\0\0", 0)


async def serve_socks(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector = tcp_connect,
) -> None:
    """One SOCKS5 client: the greeting, one CONNECT request, then the tunnel."""
    try:
        request = await asyncio.wait_for(_socks_request(reader, writer), HANDSHAKE_SECONDS)
        if request is None:
            return
        verdict = await decider.decide(request)
        if not verdict.allowed:
            writer.write(_socks_reply(SOCKS_NOT_ALLOWED))
            return
        try:
            upstream = await connect(verdict, request)
        except OSError:
            writer.write(_socks_reply(SOCKS_HOST_UNREACHABLE))
            return
        writer.write(_socks_reply(SOCKS_OK))
        await relay((reader, writer), upstream, decider)
    except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, ConnectionError):
            await writer.drain()
        writer.close()


async def _socks_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Request | None:
    version, count = await reader.readexactly(2)
    methods = await reader.readexactly(count)
    if version != 5 or 0 not in methods:
        writer.write(b"\x05\xff")
        return None
    writer.write(b"\x05\x00")
    version, command, _, kind = await reader.readexactly(4)
    if version != 5:
        return None
    if kind == 1:
        host = socket.inet_ntop(socket.AF_INET, await reader.readexactly(4))
    elif kind == 4:
        host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
    elif kind == 3:
        (length,) = await reader.readexactly(1)
        raw = await reader.readexactly(length)
        try:
            host = raw.decode("ascii")
        except UnicodeDecodeError:
            writer.write(_socks_reply(SOCKS_ADDRESS_UNSUPPORTED))
            return None
    else:
        writer.write(_socks_reply(SOCKS_ADDRESS_UNSUPPORTED))
        return None
    (port,) = struct.unpack("!H", await reader.readexactly(2))
    if command != 1:
        writer.write(_socks_reply(SOCKS_COMMAND_UNSUPPORTED))
        return None
    if not host or port == 0:
        writer.write(_socks_reply(SOCKS_ADDRESS_UNSUPPORTED))
        return None
    return Request(host, port, "SOCKS5")
