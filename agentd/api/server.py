"""The grpc.aio server: listeners, health checking and reflection.

The unix socket is 0600, in a directory of the daemon's user that no one else may
write to (privdir.py), so only its owner (and root) can connect. TCP is off unless
configured, and then requires TLS and a bearer token on every call.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentd.api import reflection
from agentd.api.decoding import DecodeGuard
from agentd.api.handover import Handover, bind_path
from agentd.api.names import SessionNames
from agentd.api.service import Servicer
from agentd.api.tls import load_server_pair, load_token
from agentd.foundation import metrics
from agentd.foundation.config import Config
from agentd.foundation.errors import ConfigError
from agentd.foundation.holder import Holder
from agentd.foundation.privdir import ensure_private_dir
from agentd.sessions.session import SessionManager
from agentd_client.v1 import agentd_pb2, agentd_pb2_grpc

log = logging.getLogger(__name__)

SERVICE_NAME = agentd_pb2.DESCRIPTOR.services_by_name["Agentd"].full_name


# Health answers without a token: load balancers and Kubernetes probes carry none,
# and it tells nothing but SERVING or NOT_SERVING.
OPEN_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"})


async def _deny(requests: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")


# A request-streaming handler, whatever the method: gRPC reads a unary call's whole
# message (up to max_message_bytes) before its handler runs, but a streaming handler's
# messages only when it asks, and this one never does. So a caller without the token
# costs the headers and the transport's flow-control window, never its body.
_DENY: grpc.RpcMethodHandler = grpc.stream_stream_rpc_method_handler(_deny)


class TokenAuth(grpc.aio.ServerInterceptor):
    """Refuses calls without `authorization: Bearer <token>` (TCP listener only)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if details.method in OPEN_METHODS:
            return await continuation(details)
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                got = value.encode() if isinstance(value, str) else value
                if hmac.compare_digest(got, self._expected):
                    return await continuation(details)

        metrics.unauthenticated_call()
        return _DENY


# What one TCP connection may hold before and around the token check: its TLS handshake
# done within 10 s, at most 100 calls at once, headers of at most 16 KiB.
TCP_OPTIONS = (
    ("grpc.server_handshake_timeout_ms", 10_000),
    ("grpc.max_concurrent_streams", 100),
    ("grpc.max_metadata_size", 16 * 1024),
)


def _check_port_free(listen: str) -> None:
    """A busy port as one clear line, before gRPC logs its own lines about it."""
    bracketed, _, port = listen.rpartition(":")
    host = bracketed.strip("[]") or None
    try:
        infos = socket.getaddrinfo(
            host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (ValueError, OSError) as exc:
        raise ConfigError(
            f"tcp_listen {listen!r} is not HOST:PORT on this machine ({exc})"
        ) from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(addr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ConfigError(
                        f"cannot listen on tcp_listen {listen}: port {port} is in use "
                        "(another agentd?); stop it or pick another port"
                    ) from None
                raise ConfigError(f"cannot listen on tcp_listen {listen}: {exc.strerror}") from None


def prepare_socket(path: str, successor: bool = False) -> None:
    """Make the socket's directory (0700) unless it exists, refuse a shared or foreign one,
    clear a stale socket and refuse a live one or anything that is not a socket.
    `successor`: the holder gave this daemon its predecessor's socket, which listens at
    `path` with no daemon behind it (a probe would wait in its backlog)."""
    ensure_private_dir(os.path.dirname(path), "socket directory", readable_by_others=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"{path} exists and is not a socket; agentd will not replace it")
    if successor:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # stale: nobody listens
    else:
        raise ConfigError(f"another agentd is already listening on {path}")
    finally:
        probe.close()


def _add_services(server: grpc.aio.Server, servicer: Servicer) -> health.aio.HealthServicer:
    agentd_pb2_grpc.add_AgentdServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable(
        server, (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
    )
    return health_servicer


class Server:
    def __init__(
        self,
        config: Config,
        servicer: Servicer,
        sessions: SessionManager | None = None,
        holder: Holder | None = None,
    ) -> None:
        """`holder`: where the unix socket is kept across a restart (handover.py)."""
        self.config = config
        # Every request's session_id may be a name or an id prefix (names.py).
        self._names: list[grpc.aio.ServerInterceptor] = (
            [SessionNames(sessions)] if sessions is not None else []
        )
        options = [
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
            # A caller whose connection dies without a word (a laptop's network gone)
            # is found within about a minute and a half: its calls are then cancelled
            # as for any caller that went away (Executor.run_one). Pings continue
            # while a long call sends nothing.
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        self._servers: list[grpc.aio.Server] = []
        self._health: list[health.aio.HealthServicer] = []
        # The TCP settings are checked first: a fault there leaves no socket behind.
        tcp = self._tcp_server(config, servicer, options) if config.tcp_listen else None
        unix = grpc.aio.server(options=options, interceptors=[DecodeGuard(), *self._names])
        self._health.append(_add_services(unix, servicer))
        self.handover = Handover(holder, config.socket_path, config.restart_wait_seconds)
        prepare_socket(config.socket_path, successor=self.handover.previous is not None)
        self._bound = bind_path(config.socket_path)
        old_umask = os.umask(0o177)
        try:
            unix.add_insecure_port(f"unix:{self._bound}")
        finally:
            os.umask(old_umask)
        self._servers.append(unix)
        if tcp is not None:
            self._servers.append(tcp)

    def _tcp_server(
        self, config: Config, servicer: Servicer, options: list[tuple[str, Any]]
    ) -> grpc.aio.Server:
        """The TLS listener; every fault in its settings is one line that names the fix."""
        token = load_token(config.token, config.token_file)
        if not (config.tls_cert and config.tls_key and token):
            raise ConfigError(
                "tcp_listen needs tls_cert, tls_key and token_file; "
                "`agentd tls init` makes them and prints the lines to add"
            )
        key_pem, cert_pem = load_server_pair(config.tls_cert, config.tls_key)
        _check_port_free(config.tcp_listen)
        tcp = grpc.aio.server(
            options=[*options, *TCP_OPTIONS],
            interceptors=[TokenAuth(token), DecodeGuard(), *self._names],
        )
        self._health.append(_add_services(tcp, servicer))
        creds = grpc.ssl_server_credentials([(key_pem, cert_pem)])
        try:
            tcp.add_secure_port(config.tcp_listen, creds)
        except RuntimeError:
            raise ConfigError(
                f"cannot listen on tcp_listen {config.tcp_listen}: the port is in use or the "
                "address is not this machine's; pick another in the config"
            ) from None
        return tcp

    async def start(self) -> None:
        for server in self._servers:
            await server.start()
        # The socket exists only once bound; tighten it in case the umask was ignored.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(self._bound, 0o600)
        self.handover.serving(self._bound)
        for h in self._health:
            await h.set("", health_pb2.HealthCheckResponse.SERVING)
            await h.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        log.info("agentd listening on unix:%s", self.config.socket_path)
        if self.config.tcp_listen:
            log.info(
                "agentd listening on tcp:%s (TLS with %s, bearer token required)",
                self.config.tcp_listen,
                self.config.tls_cert,
            )

    async def stop(self, grace: float = 5.0) -> None:
        """A stop lets go of the socket: clients are refused from now on."""
        self.handover.stop(keep=False)
        for h in self._health:
            await h.enter_graceful_shutdown()
        for server in self._servers:
            await server.stop(grace)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.config.socket_path)

    async def wait(self) -> None:
        await self._servers[0].wait_for_termination()
