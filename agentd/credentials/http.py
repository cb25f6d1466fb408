"""The HTTP pieces a credential route's relay is made of: reading h11 events under a
timeout, the connection to the upstream, the hop-by-hop headers never passed on,
masking a secret in a stream whatever its chunks and its spelling, and holding a
textual answer whole to rewrite its URLs."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11

from agentd.credentials import paths, spellings
from agentd.credentials.config import Route
from agentd.network import forward
from agentd.network.connection import CHUNK, CONNECT_SECONDS

IDLE_SECONDS = 120.0

# Not passed on by a route: the proxy's hop-by-hop set, and what the route sets itself
# (the upstream's host, no 100-continue upstream, an encoding it can mask).
HOP = forward.HOP | {b"host", b"expect", b"accept-encoding"}


class Masker:
    """Replaces each secret in a stream with `*`s as long as its spelling, in every
    spelling a body can carry it in (spellings.py), across chunk borders."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets = tuple(s for s in secrets if s)
        longest = max((len(f) for f in spellings.forms(self.secrets)), default=0)
        self.keep = max(spellings.MAX_SPELLING * longest - 1, 0)
        self.held = b""

    def mask(self, data: bytes) -> bytes:
        spans = spellings.matches(data, self.secrets) if self.secrets else []
        if not spans:
            return data
        out = bytearray(data)
        for start, end in spans:
            out[start:end] = b"*" * (end - start)
        return bytes(out)

    def feed(self, data: bytes) -> bytes:
        data = self.mask(self.held + data)
        if self.keep <= 0:
            self.held = b""
            return data
        self.held = data[-self.keep :] if len(data) > self.keep else data
        return data[: -self.keep] if len(data) > self.keep else b""

    def flush(self) -> bytes:
        data, self.held = self.held, b""
        return data


@dataclass
class Upstream:
    route: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))


async def connect(route: Route, addresses: list[str], tls: ssl.SSLContext) -> Upstream:
    """A TLS connection to the route's upstream, each address tried in turn; the last
    failure, in a few words, when none answers."""
    failure: OSError = OSError("no address to connect to")
    for address in addresses:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    address, route.port, ssl=tls, server_hostname=route.host, limit=CHUNK
                ),
                CONNECT_SECONDS,
            )
        except TimeoutError:
            failure = OSError("timed out")
            continue
        except (OSError, ssl.SSLError) as exc:
            failure = OSError(getattr(exc, "reason", None) or exc.strerror or str(exc))
            continue
        return Upstream(route.name, reader, writer)
    raise failure


async def next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Event | type:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        # asyncio.timeout, not wait_for: no task per read (a download makes thousands).
        async with asyncio.timeout(IDLE_SECONDS):
            data = await reader.read(CHUNK)
        conn.receive_data(data)


async def request_body(
    conn: h11.Connection,
    reader: asyncio.StreamReader,
    send: Callable[[h11.Event], Awaitable[None]],
    limit: int,
) -> tuple[bytes, bool] | None:
    """A request's body up to `limit` bytes and whether it ended (False: more may
    follow); a `100 Continue` first where the client waits for one. None: the request
    ended before its body did."""
    if conn.they_are_waiting_for_100_continue:
        await send(h11.InformationalResponse(status_code=100, headers=[]))
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        event = await next_event(conn, reader)
        if isinstance(event, h11.Data):
            parts.append(bytes(event.data))
            size += len(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return b"".join(parts), True
        else:
            return None
    return b"".join(parts), False


# Textual bodies up to this size have the upstream's absolute URLs rewritten onto the
# route (held whole to do it); bigger ones pass as they come.
REWRITE_HELD_BYTES = 32 * 1024 * 1024
_TEXTUAL = (b"application/json", b"text/", b"application/vnd.pypi.simple", b"application/xml")
_TEXTUAL_SUFFIX = (b"+json", b"+xml")


def rewritable(headers: list[tuple[bytes, bytes]]) -> bool:
    kind = b"".join(v for k, v in headers if k == b"content-type").split(b";")[0].strip().lower()
    length = b"".join(v for k, v in headers if k == b"content-length")
    if length.isdigit() and int(length) > REWRITE_HELD_BYTES:
        return False
    if any(k == b"content-encoding" and v.lower() not in (b"identity", b"") for k, v in headers):
        return False
    return kind.startswith(_TEXTUAL) or kind.endswith(_TEXTUAL_SUFFIX)


class Held:
    """A response held whole until its end (to rewrite it), up to REWRITE_HELD_BYTES."""

    def __init__(self, head: h11.Response) -> None:
        self.head = head
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> bool:
        """Held; False once it would be too big (the caller passes it on)."""
        self.parts.append(data)
        self.size += len(data)
        return self.size <= REWRITE_HELD_BYTES

    def data(self) -> bytes:
        return b"".join(self.parts)


def response_headers(
    route: Route, response: h11.Response, masker: Masker, port: int
) -> list[tuple[bytes, bytes]] | None:
    """The upstream's headers as the sandbox gets them: hop-by-hop ones dropped, a
    Location mapped onto the route, the secret masked; None for a redirect that leaves
    the route (answered 502, never followed)."""
    out: list[tuple[bytes, bytes]] = []
    for key, value in response.headers:
        if key in HOP and key != b"host":
            continue
        if key in (b"location", b"content-location"):
            mapped = paths.mapped_location(route, value.decode("latin-1"), port)
            if mapped is None:
                return None
            value = mapped.encode("latin-1")
        out.append((key, masker.mask(bytes(value))))
    return out
