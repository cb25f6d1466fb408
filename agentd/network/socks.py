"""SOCKS5 (RFC 1928) on a session's proxy: CONNECT only, no authentication (only
processes in the session's namespace can reach it), the same decision as HTTP's, and
the same taking over of a CONNECT to a host a masked credential goes to."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct

from agentd.network.connection import Answers, Connector, Decider, Request, tcp_connect
from agentd.network.tunnel import relay

HANDSHAKE_SECONDS = 30.0

SOCKS_OK = 0
SOCKS_FAILURE = 1
SOCKS_NOT_ALLOWED = 2
SOCKS_HOST_UNREACHABLE = 4
SOCKS_COMMAND_UNSUPPORTED = 7
SOCKS_ADDRESS_UNSUPPORTED = 8


def _socks_reply(code: int) -> bytes:
    return struct.pack("!BBBB4sH", 5, code, 0, 1, b"\0\0\0\0", 0)


def _answers() -> Answers:
    """How a CONNECT is answered here; SOCKS5 has no words: why a taken-over CONNECT
    failed is in the session's events."""
    return Answers(_socks_reply(SOCKS_OK), lambda _why: _socks_reply(SOCKS_FAILURE))


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
        interceptor = decider.intercept(request)
        if interceptor is not None:
            await interceptor(reader, writer, upstream, _answers())
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
