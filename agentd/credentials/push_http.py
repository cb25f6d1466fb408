"""A git push's HTTP side on a credential route: the receive-pack advertisement the
daemon asks the upstream for itself (what the server would update, whatever the client
showed), read whole and bounded, and a refusal answered as receive-pack answers."""

from __future__ import annotations

from urllib.parse import unquote

import h11

from agentd.credentials import push
from agentd.credentials.config import Route
from agentd.credentials.http import Upstream, next_event
from agentd.credentials.sources import Secret

# receive-pack's advertisement read before a push, at most (a bigger one cannot be read:
# every update of the push then asks).
ADVERTISED_BYTES = 16 * 1024 * 1024


def advertisement_request(route: Route, secret: Secret, path: str) -> h11.Request | None:
    """The GET of the advertisement for a push to `path`; None when `path` is not one."""
    base, _, last = path.partition("?")[0].rpartition("/")
    if unquote(last).lower() != "git-receive-pack":
        return None
    headers = [
        (b"Host", route.netloc.encode()),
        (b"Accept-Encoding", b"identity"),
        (b"User-Agent", b"git/agentd"),
        (route.header.encode(), secret.header_value(route).encode()),
    ]
    target = f"{base}/info/refs?service=git-receive-pack".encode()
    return h11.Request(method="GET", target=target, headers=headers)


async def collected(upstream: Upstream) -> tuple[int, bytes | None, bool]:
    """A whole answer from the upstream: its status, its body (None past
    ADVERTISED_BYTES) and whether the connection may carry the next request."""
    status, parts, size = 0, [], 0
    while True:
        event = await next_event(upstream.conn, upstream.reader)
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > ADVERTISED_BYTES:
                return status, None, False
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            done = upstream.conn.our_state is h11.DONE and upstream.conn.their_state is h11.DONE
            if done:
                upstream.conn.start_next_cycle()
            return status, b"".join(parts), done
        elif not isinstance(event, h11.InformationalResponse):
            raise OSError("the upstream closed")


def refusal(commands: push.Commands, why: str) -> list[h11.Event]:
    """receive-pack's answer refusing every update of the push, with `why`."""
    data = push.refusal(commands, why)
    return [
        h11.Response(
            status_code=200,
            headers=[
                ("Content-Type", "application/x-git-receive-pack-result"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-cache"),
            ],
        ),
        h11.Data(data=data),
        h11.EndOfMessage(),
    ]
