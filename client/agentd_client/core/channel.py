"""The channel to the daemon: where it is, TLS and the token, and gRPC's retry policy."""

from __future__ import annotations

import json
import os
from typing import Any

import grpc

from agentd_client.core.calls import SAFE_RPCS
from agentd_client.core.paths import default_socket_path

__all__ = ["default_socket_path", "open_channel"]


# gRPC repeats only the calls that read (a daemon restarting answers UNAVAILABLE for a
# moment); a tool call or a new session must never run twice behind the caller's back.
SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": [{"service": "agentd.v1.Agentd", "method": m} for m in SAFE_RPCS],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.1s",
                "maxBackoff": "1s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ]
}


def identity() -> str:
    """Who this client is (user, host, terminal), sent as its user agent when it connects:
    the daemon records it with the decisions this client makes."""
    import getpass
    import socket as socket_

    def clean(text: str) -> str:
        return "".join(ch for ch in text if ch.isprintable() and ch not in "();=")[:80]

    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    tty = ""
    for fd in (0, 1, 2):
        try:
            tty = os.ttyname(fd)
            break
        except OSError:
            continue
    return (
        f"agentd-client (user={clean(user)}; host={clean(socket_.gethostname())}; tty={clean(tty)})"
    )


OPTIONS = [
    ("grpc.primary_user_agent", identity()),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
]


def _tls_credentials(root_certificates: bytes | None, token: str) -> grpc.ChannelCredentials:
    """TLS for a daemon's TCP listener, with the bearer token it requires on every call
    (without one, only health checks are answered)."""
    tls = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    if not token:
        return tls
    return grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(token))


def open_channel(
    flavour: Any,
    socket: str | None,
    address: str | None,
    token: str,
    roots: bytes | None,
    server_name: str = "",
) -> Any:
    """A channel of `flavour` (grpc or grpc.aio): the unix socket, or TLS TCP with a token.
    `server_name`: the name sent in TLS (SNI) and checked against the certificate, for
    an address that routes to daemons by name."""
    if address:
        creds = _tls_credentials(roots, token)
        named = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        return flavour.secure_channel(address, creds, options=[*OPTIONS, *named])
    return flavour.insecure_channel(f"unix:{socket or default_socket_path()}", options=OPTIONS)
