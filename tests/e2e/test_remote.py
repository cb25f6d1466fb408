"""A laptop's view: `agentd tls init`, a daemon on 127.0.0.1 with TLS and a token file,
and agentctl reaching it through a context, as the README tells people to do."""

from __future__ import annotations

import json
import os
import queue
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentd_client.v1 import agentd_pb2, agentd_pb2_grpc
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon

READ = '{"file_path": "notes.txt"}'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agentd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentd", *args], capture_output=True, text=True, timeout=60
    )


@dataclass
class Remote:
    daemon: DaemonProcess
    address: str
    tls: Path
    env: dict[str, str]  # a laptop's: its own client config, no AGENTD_SOCKET


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    base = tmp_path_factory.mktemp("remote")
    tls = base / "tls"
    address = f"127.0.0.1:{_free_port()}"
    made = _agentd("tls", "init", "--dir", str(tls), "--listen", address, "--name", "devbox.test")
    assert made.returncode == 0, made.stderr
    # The config lines it prints are the ones the daemon runs with.
    lines = [
        ln for ln in made.stdout.splitlines() if ln.startswith(("tcp_listen", "tls_", "token"))
    ]
    assert [ln.split(" = ")[0] for ln in lines] == [
        "tcp_listen",
        "tls_cert",
        "tls_key",
        "token_file",
    ]
    config = base / "agentd.toml"
    config.write_text("\n".join(lines) + "\n")
    assert "token = " not in config.read_text()  # the token itself is not in the config
    daemon = start_daemon(base / "d", ["--config", str(config)])
    env = {"AGENTD_CLIENT_CONFIG": str(base / "laptop" / "client.toml")}
    yield Remote(daemon, address, tls, env)
    assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log


def test_tls_init_makes_a_ca_signed_cert_with_the_right_names(remote: Remote) -> None:
    ca = x509.load_pem_x509_certificate((remote.tls / "ca.pem").read_bytes())
    cert = x509.load_pem_x509_certificate((remote.tls / "server.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = san.get_values_for_type(x509.DNSName)
    ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    assert {"devbox.test", socket.gethostname(), "localhost"} <= set(dns)
    assert {"127.0.0.1", "::1"} <= ips
    for secret in ("server-key.pem", "token"):
        assert stat.S_IMODE((remote.tls / secret).stat().st_mode) == 0o600, secret
    assert not (remote.tls / "ca-key.pem").exists()
    # Run again, it refuses to overwrite what clients already trust.
    again = _agentd("tls", "init", "--dir", str(remote.tls))
    assert again.returncode == 2
    assert "--force" in ctl.one_line(again.stderr)


def test_the_tcp_listener_is_logged_at_start(remote: Remote) -> None:
    assert f"listening on tcp:{remote.address}" in remote.daemon.log


def test_laptop_with_a_context(remote: Remote, workspace: Path) -> None:
    env = remote.env
    add = ctl.run(
        "context", "add", "devbox", "--address", remote.address,
        "--ca", str(remote.tls / "ca.pem"), "--token-file", str(remote.tls / "token"),
        env=env,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    used = ctl.run("context", "use", "devbox", "--json", env=env)
    assert json.loads(used.stdout) == {"current_context": "devbox"}

    status = ctl.run("status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["pid"] == remote.daemon.proc.pid

    (workspace / "notes.txt").write_text("from the laptop\n")
    new = ctl.run(
        "--context", "devbox", "session", "new", "--name", "web",
        "--workspace", str(workspace), "--mode", "bypassPermissions",
        env=env,
    )  # fmt: skip
    assert new.returncode == 0, new.stderr
    sid = new.stdout.strip()

    # attach --from now shows nothing of the past, then live events.
    before = ctl.run("call", "-s", "web", "--id", "toolu_before", "Read", READ, env=env)
    assert before.returncode == 0 and before.stdout.startswith("1\tfrom the laptop")
    attach = ctl.popen("attach", "web", "--from", "now", "--json", env=env)
    lines: queue.Queue[str] = queue.Queue()
    assert attach.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in attach.stdout], daemon=True).start()
    try:
        # It is live once it shows a call; until then, each call may come before it.
        for i in range(20):
            r = ctl.run("call", "-s", "web", "--id", f"toolu_live{i}", "Read", READ, env=env)
            assert r.returncode == 0, r.stderr
            try:
                first = json.loads(lines.get(timeout=3))
                break
            except queue.Empty:
                continue
        else:
            raise AssertionError(f"attach --from now showed nothing: {attach.stderr}")
    finally:
        attach.terminate()
        attach.wait(10)
    assert first["session_id"] == sid
    kind = next(k for k in first if k in ("call_started", "progress", "call_finished"))
    assert "toolu_live" in json.dumps(first[kind]), first
    assert "toolu_before" not in json.dumps(first)

    # The prefix of the id works as well as the name, over TLS too.
    shown = ctl.run("session", "show", sid[:8], env=env)
    assert json.loads(shown.stdout)["name"] == "web"
    closed = ctl.run("session", "close", "web", env=env)
    assert closed.returncode == 0 and sid in closed.stdout


def test_health_answers_without_a_token_but_nothing_else_does(remote: Remote) -> None:
    ca = (remote.tls / "ca.pem").read_bytes()
    with grpc.secure_channel(remote.address, grpc.ssl_channel_credentials(ca)) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING

    # GetStatus without a token: refused by the daemon...
    with grpc.secure_channel(remote.address, grpc.ssl_channel_credentials(ca)) as ch:
        stub = agentd_pb2_grpc.AgentdStub(ch)
        with pytest.raises(grpc.RpcError) as refused_rpc:
            stub.GetStatus(agentd_pb2.GetStatusRequest(), timeout=10)
    assert refused_rpc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # ...and through agentctl: exit 3, one line that names the fix.
    no_token = ctl.run("--address", remote.address, "--ca", str(remote.tls / "ca.pem"), "status")
    assert no_token.returncode == 3
    line = ctl.one_line(no_token.stderr)
    assert "refused" in line and "bearer token" in line and "--token-file" in line
    # A wrong token is refused the same way.
    wrong = remote.tls.parent / "wrong-token"
    wrong.write_text("not-the-token\n")
    wrong.chmod(0o600)
    refused = ctl.run(
        "--address", remote.address, "--ca", str(remote.tls / "ca.pem"),
        "--token-file", str(wrong), "status",
    )  # fmt: skip
    assert refused.returncode == 3
    line = ctl.one_line(refused.stderr)
    assert "refused" in line and "bearer token" in line and "--token-file" in line


def test_a_wrong_ca_is_exit_2_and_one_line(remote: Remote, tmp_path: Path) -> None:
    other = _agentd("tls", "init", "--dir", str(tmp_path / "other"))
    assert other.returncode == 0, other.stderr
    r = ctl.run(
        "--address", remote.address, "--ca", str(tmp_path / "other" / "ca.pem"),
        "--token-file", str(remote.tls / "token"), "status",
    )  # fmt: skip
    assert r.returncode == 2
    assert "not signed by the given CA" in ctl.one_line(r.stderr)
    # The same through the environment, as a shell profile would set it.
    env = {
        "AGENTD_ADDRESS": remote.address,
        "AGENTD_CA": str(tmp_path / "other" / "ca.pem"),
        "AGENTD_TOKEN_FILE": str(remote.tls / "token"),
    }
    assert ctl.run("status", env=env).returncode == 2
    env["AGENTD_CA"] = str(remote.tls / "ca.pem")
    assert ctl.run("status", env=env).returncode == 0


def _serve_fails(tmp_path: Path, config: str) -> str:
    """The one line a daemon that cannot start prints; it must exit 2."""
    path = tmp_path / "bad.toml"
    path.write_text(config)
    r = _agentd(
        "serve", "--config", str(path), "--socket", str(tmp_path / "run" / "s.sock"),
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert not (tmp_path / "run" / "s.sock").exists()
    return ctl.one_line(r.stderr)


def test_start_up_faults_are_one_line_and_exit_2(remote: Remote, tmp_path: Path) -> None:
    tls = remote.tls
    good = (
        f'tcp_listen = "127.0.0.1:{_free_port()}"\ntls_cert = "{tls}/server.pem"\n'
        f'tls_key = "{tls}/server-key.pem"\ntoken_file = "{tls}/token"\n'
    )
    missing = good.replace("server.pem", "missing.pem")
    line = _serve_fails(tmp_path, missing)
    assert "tls_cert" in line and "does not exist" in line
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    bad_key = good.replace(f"{tls}/server-key.pem", str(garbage))
    assert "not an unencrypted PEM private key" in _serve_fails(tmp_path, bad_key)
    other = _agentd("tls", "init", "--dir", str(tmp_path / "other"))
    assert other.returncode == 0
    wrong_key = good.replace(f"{tls}/server-key.pem", str(tmp_path / "other" / "server-key.pem"))
    assert "is not the key of tls_cert" in _serve_fails(tmp_path, wrong_key)
    busy = good.replace(good.split('"')[1], remote.address)
    assert "is in use" in _serve_fails(tmp_path, busy)
    no_token = good.replace(f"{tls}/token", str(tmp_path / "nope"))
    assert "token_file" in _serve_fails(tmp_path, no_token)
    both = good + 'token = "also-here"\n'
    assert "not both" in _serve_fails(tmp_path, both)


def test_reflection_needs_the_token(remote: Remote) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    ca = (remote.tls / "ca.pem").read_bytes()
    with grpc.secure_channel(remote.address, grpc.ssl_channel_credentials(ca)) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.ServerReflectionInfo(iter([request]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_tls_init_keeps_its_secrets_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: another user could plant files there
    r = _agentd("tls", "init", "--dir", str(shared))
    assert r.returncode == 2 and "private directory" in ctl.one_line(r.stderr)
    assert list(shared.iterdir()) == []
    # With --force over existing files, a planted symlink is replaced, never written through.
    private = tmp_path / "private"
    assert _agentd("tls", "init", "--dir", str(private)).returncode == 0
    bait = tmp_path / "bait"
    bait.write_text("")
    (private / "token").unlink()
    (private / "token").symlink_to(bait)
    assert _agentd("tls", "init", "--dir", str(private), "--force").returncode == 0
    assert bait.read_text() == ""
    assert not (private / "token").is_symlink()
    assert stat.S_IMODE((private / "token").stat().st_mode) == 0o600


def test_a_token_file_others_can_read_is_refused_on_both_sides(
    remote: Remote, tmp_path: Path
) -> None:
    """As ssh refuses a private key others can read: one line, with the chmod."""
    shared = tmp_path / "token"
    shared.write_bytes((remote.tls / "token").read_bytes())
    shared.chmod(0o644)
    r = ctl.run("--address", remote.address, "--ca", str(remote.tls / "ca.pem"),
                "--token-file", str(shared), "status")  # fmt: skip
    assert r.returncode == 2
    line = ctl.one_line(r.stderr)
    assert "mode 0644" in line and f"chmod 600 {shared}" in line, line
    laptop = {"AGENTD_CLIENT_CONFIG": str(tmp_path / "c.toml")}
    added = ctl.run("context", "add", "x", "--address", remote.address, "--token-file",
                    str(shared), env=laptop)  # fmt: skip
    assert added.returncode == 64 and f"chmod 600 {shared}" in ctl.one_line(added.stderr)
    tls = remote.tls
    config = (
        f'tcp_listen = "127.0.0.1:{_free_port()}"\ntls_cert = "{tls}/server.pem"\n'
        f'tls_key = "{tls}/server-key.pem"\ntoken_file = "{shared}"\n'
    )
    line = _serve_fails(tmp_path, config)
    assert "token_file" in line and f"chmod 600 {shared}" in line, line
    shared.chmod(0o600)  # and once fixed, both use it
    again = ctl.run("--address", remote.address, "--ca", str(remote.tls / "ca.pem"),
                    "--token-file", str(shared), "status")  # fmt: skip
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("where", ["XDG_CONFIG_HOME", "AGENTD_CONFIG"])
def test_tls_init_names_the_config_file_the_daemon_reads(tmp_path: Path, where: str) -> None:
    """The path it prints is the one `agentd serve` then reads, whatever says where."""
    config = tmp_path / "conf" / "agentd" / "config.toml"
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTD_CONFIG", "XDG_CONFIG_HOME")}
    env[where] = str(config if where == "AGENTD_CONFIG" else tmp_path / "conf")
    address = f"127.0.0.1:{_free_port()}"
    made = subprocess.run(
        [sys.executable, "-m", "agentd", "tls", "init", "--dir", str(tmp_path / "tls"),
         "--listen", address],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert f"Add to the daemon's config ({config}) and restart it:" in made.stdout
    lines = [
        ln for ln in made.stdout.splitlines() if ln.startswith(("tcp_listen", "tls_", "token"))
    ]
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("\n".join(lines) + "\n")
    daemon = start_daemon(tmp_path / "d", env={where: env[where]})
    try:
        assert f"listening on tcp:{address}" in daemon.wait_for_log("listening on tcp:")
    finally:
        daemon.stop()


def test_address_flag_keeps_the_contexts_ca_and_token(remote: Remote) -> None:
    """`--address` overrides one field of the context, as kubectl's `--server` does."""
    env = remote.env
    add = ctl.run(
        "context", "add", "moved", "--address", "127.0.0.1:9",
        "--ca", str(remote.tls / "ca.pem"), "--token-file", str(remote.tls / "token"),
        env=env,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    status = ctl.run("--context", "moved", "--address", remote.address, "status", env=env)
    assert status.returncode == 0, status.stderr
    # Over TCP it says where it reached the daemon, not a socket path of another machine.
    assert f"on {remote.address}" in status.stdout and ".sock" not in status.stdout
    shown = ctl.run(
        "--context", "moved", "--address", remote.address, "context", "show", "--json", env=env
    )
    where = json.loads(shown.stdout)
    assert where["address"] == remote.address and where["ca"] == str(remote.tls / "ca.pem")
    assert where["token_file"] == str(remote.tls / "token") and where["context"] == "moved"
    # No CA anywhere: the refusal says so, and does not blame a CA never given.
    nowhere = {**env, "AGENTD_CLIENT_CONFIG": str(remote.tls / "none.toml")}
    bare = ctl.run("--address", remote.address, "status", env=nowhere)
    assert bare.returncode == 2
    assert "no CA was given" in ctl.one_line(bare.stderr), bare.stderr
