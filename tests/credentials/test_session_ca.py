"""A session's CA: its leaves verify for their host under it, and under no other
session's; what it hands out is its certificate, never a key."""

from __future__ import annotations

import asyncio
import ssl
import tempfile

from agentd.credentials.session_ca import SessionCA, sandbox_environment


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str:
    """A TLS handshake on loopback; the ALPN agreed, or the error."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def serve(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await done
        w.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        _r, w = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=host)
        agreed = w.get_extra_info("ssl_object").selected_alpn_protocol()
        w.close()
        return str(agreed)
    except ssl.SSLError as exc:
        return type(exc).__name__
    finally:
        done.set_result(None)
        srv.close()


def _trusting(ca: SessionCA) -> ssl.SSLContext:
    with tempfile.NamedTemporaryFile() as f:
        f.write(ca.pem)
        f.flush()
        ctx = ssl.create_default_context(cafile=f.name)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    return ctx


def test_a_leaf_verifies_under_its_own_session_ca_only() -> None:
    mine, theirs = SessionCA("s1"), SessionCA("s2")
    leaf = mine.server_context("api.example")
    assert mine.server_context("api.example") is leaf  # kept
    assert asyncio.run(_handshake(leaf, _trusting(mine), "api.example")) == "http/1.1"
    assert asyncio.run(_handshake(leaf, _trusting(theirs), "api.example")).startswith("SSLCert")
    assert asyncio.run(_handshake(leaf, _trusting(mine), "other.example")).startswith("SSLCert")


def test_it_hands_out_a_certificate_never_a_key() -> None:
    ca = SessionCA("s1")
    assert ca.pem.startswith(b"-----BEGIN CERTIFICATE-----") and b"PRIVATE" not in ca.pem
    assert sandbox_environment()["NODE_EXTRA_CA_CERTS"].endswith("ca.pem")
