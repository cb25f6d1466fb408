"""The proxy's HTTP side: CONNECT tunnels and forward requests, on sockets the daemon
bound inside a session's namespace (netns.listen); SOCKS5 is socks.py.

Every new connection is decided by the `Decider` (rules by name, an ask, the address
guard) before anything is connected, and connected to an address the decision checked,
never to a name resolved again. CONNECT is tunnelled as is, unless a listener takes it
over (`Decider.intercept`: TLS terminated for a host a masked credential goes to). Each
forward request on a kept-alive connection is parsed and decided by its own host
(forward.py): a later request never rides an earlier one's decision. A
refusal is an answer the program shows: an HTTP 403 whose body names the host and the
rule that would allow it, or SOCKS5's "not allowed by ruleset".

Routes (agentd/credentials/: git-aware routes adding a token, header-adding routes) plug in as a
`Connector`: given the decision, it opens the upstream end; the default is plain TCP.
"""

from __future__ import annotations

import asyncio
import contextlib

from agentd.network import forward
from agentd.network.connection import Answers, Connector, Decider, Request, tcp_connect
from agentd.network.http_parts import HANDSHAKE_SECONDS, decided, http_answer, split_authority
from agentd.network.tunnel import relay


def _answers() -> Answers:
    """How a CONNECT is answered here: established, or a 502 saying why."""
    return Answers(
        b"HTTP/1.1 200 Connection Established\r\n\r\n",
        lambda why: http_answer("502 Bad Gateway", f"agentd's proxy: {why}\n"),
    )


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
    """One client connection to the HTTP proxy: a CONNECT tunnel, or forward requests,
    each parsed and decided by its own host (forward.py)."""
    try:
        head = await _read_head(reader)
        if head is None:
            return
        try:
            method, target, _version = head.split(b"\r\n", 1)[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            writer.write(http_answer("400 Bad Request", "agentd's proxy: malformed request\n"))
            return
        if method == "CONNECT":
            await _tunnel(target, reader, writer, decider, connect)
            return
        await forward.serve(head, reader, writer, decider, connect)
    except (OSError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(OSError, ConnectionError):
            await writer.drain()
        writer.close()


async def _tunnel(
    target: str,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    decider: Decider,
    connect: Connector,
) -> None:
    """CONNECT: decided once, then the bytes both ways unread, or taken over."""
    where = split_authority(target, 443)
    if where is None or "[" in target and ":" not in where[0]:
        writer.write(http_answer("400 Bad Request", "CONNECT needs host:port\n"))
        return
    request = Request(where[0], where[1], "CONNECT")
    upstream = await decided(request, writer, decider, connect)
    if upstream is None:
        return
    interceptor = decider.intercept(request)
    if interceptor is not None:
        await interceptor(reader, writer, upstream, _answers())
        return
    writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
    await relay((reader, writer), upstream, decider)


# SOCKS5 (RFC 1928), CONNECT only, no authentication: the namespace is the session's.
