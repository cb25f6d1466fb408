"""The proxy's HTTP side: CONNECT tunnels and forward requests, on sockets the daemon
bound inside a session's namespace (netns.listen); SOCKS5 is socks.py.

Every new connection is decided by the `Decider` (rules by name, an ask, the address
guard) before anything is connected, and connected to an address the decision checked,
never to a name resolved again. CONNECT is tunnelled as is: no TLS interception. A
refusal is an answer the program shows: an HTTP 403 whose body names the host and the
rule that would allow it, or SOCKS5's "not allowed by ruleset".

Routes (agentd/credentials/: git-aware routes adding a token, header-adding routes) plug in as a
`Connector`: given the decision, it opens the upstream end; the default is plain TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from agentd.network.connection import (
    Connector,
    Decider,
    Request,
    refusal_body,
    tcp_connect,
)
from agentd.network.tunnel import relay

HEAD_LIMIT = 64 * 1024
HANDSHAKE_SECONDS = 30.0
# Headers a client meant for the proxy, never passed on.
_PROXY_HEADERS = frozenset({b"proxy-connection", b"proxy-authorization", b"proxy-authenticate"})


def _http_answer(status: str, body: str, extra: str = "") -> bytes:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + data


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
