"""Where WebFetch may connect: public addresses only, unless the daemon's config names
the host (`webfetch_allow_private_hosts`).

The check lives in the connection itself (an httpcore network backend): the name is
resolved once, every address it resolves to is checked, and the socket is connected to
a checked address while the Host header and TLS SNI keep the name. A DNS answer that
changes between the check and the connect (rebinding) therefore cannot steer a fetch
inside, and every connection, each redirect hop included, passes the same check.
Spellings of an address (`2130706433`, `0x7f.1`, `[::ffff:127.0.0.1]`) are caught too:
what is checked is the address the resolver returns, not the text of the URL.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from agentd.foundation.errors import ToolError
from agentd.network.address import AllowList, internal_reason

# Resolves (host, port) to the addresses to try, in order.
Resolver = Callable[[str, int], Awaitable[list[str]]]


class InternalAddressRefused(ToolError):
    def __init__(self, host: str, address: str, reason: str) -> None:
        shown = host if host == address else f"{host} (it resolves to {address})"
        super().__init__(
            f"WebFetch refused to connect to {shown}: that is a {reason} address, inside this "
            f"machine or its network. Only public addresses can be fetched. An operator can "
            f"allow an internal host by listing it in the daemon's webfetch_allow_private_hosts "
            f"setting."
        )


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, in the order the system resolver gives them."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """Resolves once, refuses internal addresses, connects to the address it checked."""

    def __init__(self, allow: AllowList, resolve: Resolver = system_resolve) -> None:
        self._allow = allow
        self._resolve = resolve
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._resolve(host, port)
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        for address in addresses:
            reason = internal_reason(address)
            if reason and not self._allow.allows(host, address):
                raise InternalAddressRefused(host, address, reason)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("WebFetch does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, connecting through CheckedBackend and ignoring proxy settings
    from the environment (a proxy would resolve the name itself, past the check)."""

    def __init__(self, allow: AllowList, resolve: Resolver = system_resolve) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=CheckedBackend(allow, resolve),
        )
