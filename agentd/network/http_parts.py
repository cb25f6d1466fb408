"""The HTTP proxy's pieces its CONNECT and forward sides share: its own answers (a
refusal names the host and what would allow it), authorities parsed, and the upstream
end of a decided request."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from agentd.network.connection import Connector, Decider, Request, refusal_body

HEAD_LIMIT = 64 * 1024
HANDSHAKE_SECONDS = 30.0


def http_answer(status: str, body: str, extra: str = "") -> bytes:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + data


def split_authority(authority: str, default_port: int) -> tuple[str, int] | None:
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


async def decided(
    request: Request,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """The upstream end of an allowed request; None once a refusal was answered."""
    verdict = await decider.decide(request)
    if not verdict.allowed:
        extra = f"X-Agentd-Refused: {request.host}:{request.port}\r\n"
        writer.write(http_answer("403 Forbidden", refusal_body(request, verdict), extra))
        return None
    try:
        return await connect(verdict, request)
    except OSError as exc:
        body = f"agentd's proxy could not reach {request.host}:{request.port}: {exc}\n"
        writer.write(http_answer("502 Bad Gateway", body))
        return None
