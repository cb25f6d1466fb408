"""An unauthenticated TCP client costs the daemon a small, bounded amount (issue 17,
item 6): no request body is read or buffered before the bearer token is checked.

The attack: many concurrent calls with no token, each sending a body just under the
daemon's message limit. Before the fix the denial was a unary handler, so gRPC read
and decoded each whole body first (24 such calls took the daemon from 93 to over
500 MiB). The measure is the daemon's peak resident memory (VmHWM), before and after.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from agentd_client.v1 import agentd_pb2_grpc as pb_grpc
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.ports import free_port

TOKEN = "unauth-test-token"
ATTACKERS = 24
BODY = 15 * 1024 * 1024
# The peak may rise this much, for all the attackers together (before the fix: >360 MiB).
ALLOWED_RISE = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def tls_daemon(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DaemonProcess, str, bytes]]:
    base = tmp_path_factory.mktemp("unauth")
    key, cert = base / "key.pem", base / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    address = f"127.0.0.1:{free_port()}"
    config = base / "agentd.toml"
    config.write_text(
        f'tcp_listen = "{address}"\ntls_cert = "{cert}"\ntls_key = "{key}"\ntoken = "{TOKEN}"\n'
    )
    proc = start_daemon(base, ["--config", str(config)])
    yield proc, address, cert.read_bytes()
    assert proc.stop() == 0, proc.log


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _attack(address: str, ca: bytes, workspace: str) -> grpc.StatusCode:
    creds = grpc.ssl_channel_credentials(root_certificates=ca)
    options = [("grpc.max_send_message_length", 32 * 1024 * 1024)]
    with grpc.secure_channel(address, creds, options=options) as channel:
        stub = pb_grpc.AgentdStub(channel)
        request = pb.CreateSessionRequest(workspace_roots=[workspace], name="x" * BODY)
        try:
            stub.CreateSession(request, timeout=60)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_unauthenticated_bodies_are_not_read(
    tls_daemon: tuple[DaemonProcess, str, bytes], workspace: Path
) -> None:
    proc, address, ca = tls_daemon
    with Client(address=address, token=TOKEN, root_certificates=ca, timeout=30) as c:
        assert c.status().pid == proc.proc.pid  # warm: every part of the server is up
    before = _peak_rss(proc.proc.pid)
    with ThreadPoolExecutor(ATTACKERS) as pool:
        codes = list(pool.map(lambda _: _attack(address, ca, str(workspace)), range(ATTACKERS)))
    # Refused, whatever the transport made of a body never read.
    assert grpc.StatusCode.OK not in codes, codes
    assert grpc.StatusCode.UNAUTHENTICATED in codes, codes
    rise = _peak_rss(proc.proc.pid) - before
    assert rise < ALLOWED_RISE, (
        f"peak RSS rose {rise >> 20} MiB for {ATTACKERS} unauthenticated calls"
    )
    # And the daemon still serves a client with the token.
    with Client(address=address, token=TOKEN, root_certificates=ca, timeout=30) as c:
        assert c.status().pid == proc.proc.pid
    assert "Traceback" not in proc.log, proc.log
