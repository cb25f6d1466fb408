"""The optional TCP listener: TLS, and a bearer token on every call."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon

TOKEN = "s3cret-token-for-tests"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tls_daemon(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DaemonProcess, str, bytes]]:
    base = tmp_path_factory.mktemp("tcp")
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
    address = f"127.0.0.1:{_free_port()}"
    config = base / "agentd.toml"
    config.write_text(
        f'tcp_listen = "{address}"\ntls_cert = "{cert}"\ntls_key = "{key}"\ntoken = "{TOKEN}"\n'
    )
    proc = start_daemon(base, ["--config", str(config)])
    yield proc, address, cert.read_bytes()
    assert proc.stop() == 0, proc.log


def test_tls_with_token_is_served(
    tls_daemon: tuple[DaemonProcess, str, bytes], workspace: Path
) -> None:
    proc, address, ca = tls_daemon
    with Client(address=address, token=TOKEN, root_certificates=ca, timeout=30) as c:
        assert c.status().pid == proc.proc.pid
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        (workspace / "f.txt").write_text("over tcp\n")
        assert c.run_tool(sid, "Read", {"file_path": "f.txt"}).text.startswith("1\tover tcp")


def test_wrong_or_missing_token_is_refused(tls_daemon: tuple[DaemonProcess, str, bytes]) -> None:
    _, address, ca = tls_daemon
    for token in ("wrong", ""):
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
        if token:
            creds = grpc.composite_channel_credentials(
                creds, grpc.access_token_call_credentials(token)
            )
        with grpc.secure_channel(address, creds) as channel:
            from agentd_client.v1 import agentd_pb2 as pb
            from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.AgentdStub(channel).GetStatus(pb.GetStatusRequest(), timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_plain_tcp_without_tls_is_refused(tls_daemon: tuple[DaemonProcess, str, bytes]) -> None:
    _, address, _ = tls_daemon
    with grpc.insecure_channel(address) as channel:
        from agentd_client.v1 import agentd_pb2 as pb
        from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.AgentdStub(channel).GetStatus(pb.GetStatusRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_streams_without_token_are_refused(tls_daemon: tuple[DaemonProcess, str, bytes]) -> None:
    _, address, ca = tls_daemon
    creds = grpc.ssl_channel_credentials(root_certificates=ca)
    with grpc.secure_channel(address, creds) as channel:
        from agentd_client.v1 import agentd_pb2 as pb
        from agentd_client.v1 import agentd_pb2_grpc as pb_grpc

        stream = pb_grpc.AgentdStub(channel).Attach(pb.AttachRequest(session_id="x"), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            next(iter(stream))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_over_tcp_no_terminal_socket_is_offered_and_the_grpc_path_serves(
    tls_daemon: tuple[DaemonProcess, str, bytes], workspace: Path
) -> None:
    """The terminal socket is beside the unix API socket: a client over TCP is offered
    none (open_channel: None) and drives the task over WriteInput and ReadOutput."""
    import threading

    from agentd_client.core.terminal_channel import open_channel
    from agentd_client.v1 import agentd_pb2 as pb

    _, address, ca = tls_daemon
    with Client(address=address, token=TOKEN, root_certificates=ca, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        task = c.stub.StartTask(
            pb.StartTaskRequest(
                session_id=sid,
                command="stty raw -echo; echo ready; exec cat",
                pty=pb.TerminalSize(rows=24, cols=80),
            )
        ).task_id
        try:
            offered = c.stub.OpenTerminal(
                pb.OpenTerminalRequest(session_id=sid, task_id=task, uid=0, input=True)
            )
            assert offered.path == "" and offered.token == b""
            assert open_channel(c, sid, task, input=True) is None

            def keys() -> Iterator[pb.TaskInput]:
                yield pb.TaskInput(session_id=sid, task_id=task)
                yield pb.TaskInput(data=b"over-grpc")

            writer = threading.Thread(target=lambda: c.stub.WriteInput(keys()), daemon=True)
            seen = b""
            output = c.stub.ReadOutput(pb.ReadOutputRequest(session_id=sid, id=task, follow=True))
            for chunk in output:
                seen += chunk.data
                if b"ready" in seen and writer.ident is None:
                    writer.start()
                if b"over-grpc" in seen:
                    break
            output.cancel()
        finally:
            c.stub.SignalTask(pb.SignalTaskRequest(session_id=sid, task_id=task, signal="KILL"))
