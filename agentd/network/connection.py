"""A proxied connection as the protocols and the service see it: what was asked for
(`Request`), what was decided (`Verdict`), who decides (`Decider`), and how the upstream
end is opened (`Connector`: plain TCP by default; the credential routes that add a token
or headers plug in here), and what a refused program is shown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

CHUNK = 256 * 1024
CONNECT_SECONDS = 15.0


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

    session_id: str = ""

    async def decide(self, request: Request) -> Verdict:  # pragma: no cover - interface
        raise NotImplementedError

    def carried(self, sent: int, received: int) -> None:
        """Bytes a connection carried, once it ended."""

    def intercept(self, request: Request) -> Interceptor | None:
        """Who takes over an allowed CONNECT; None: tunnelled untouched."""
        return None

    def carries(self, request: Request, parts: list[bytes]) -> str | None:
        """Why a plain forward request whose line and headers are `parts` is refused
        (it carries what must not go out in the clear); None: it may go."""
        return None


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Connector = Callable[[Verdict, Request], Awaitable[Streams]]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Decider], Awaitable[None]]
# A CONNECT (HTTP's or SOCKS5's) taken over once decided and connected: given the
# client's streams, the upstream's and the protocol's `Answers`, it answers the CONNECT
# itself. Masked credentials terminate TLS so.
Interceptor = Callable[
    [asyncio.StreamReader, asyncio.StreamWriter, Streams, "Answers"], Awaitable[None]
]


@dataclass(frozen=True, slots=True)
class Answers:
    """How a proxy protocol answers a CONNECT: that it goes on, or why it does not."""

    ok: bytes
    failed: Callable[[str], bytes]


class Listener:
    """One more listener in every proxied session's namespace (the credential routes,
    agentd/credentials/): its port, what the sandbox's environment gets, and
    the handler of each connection (decided through the same `Decider`)."""

    def port(self) -> int | None:  # pragma: no cover - interface
        """The loopback port to listen on in each namespace; None: none."""
        raise NotImplementedError

    def environment(self, session_id: str) -> dict[str, str]:  # pragma: no cover
        raise NotImplementedError

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decider: Decider
    ) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def files(self, session_id: str) -> list[tuple[bytes, str]]:
        """Files the sandbox is given by content: (content, path inside)."""
        return []

    def intercept(self, session_id: str, request: Request) -> Interceptor | None:
        """Who takes over an allowed CONNECT of the session; None: not this listener."""
        return None

    def carries(self, session_id: str, request: Request, parts: list[bytes]) -> str | None:
        """Why the session's plain forward request is refused; None: not by this one."""
        return None


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


def refused_line(host: str, verdict: Verdict) -> str:
    """Why one host was refused, and what would allow it when a rule would (a private
    address or a deny rule is refused whatever is added): for a command's result."""
    if not verdict.hint:
        return verdict.reason
    return (
        f"{verdict.reason} (a WebFetch(domain:{verdict.hint.split(':')[0]}) rule or the "
        f"sandbox.network.allowedDomains entry {verdict.hint!r} would allow it)"
    )


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
