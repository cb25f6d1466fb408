"""Daemons routed by name: the shipped entry point (deploy/router/nginx.conf, Debian's
nginx) in front of two daemons, each with its own certificate, token and workspace;
agentctl contexts that differ only in their server name reach each its own daemon, and
a name no route lists reaches none."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.ports import free_port
from tests.support.router import available, router
from tests.support.workspaces import reachable_workspace

pytestmark = pytest.mark.skipif(not available(), reason="nginx is not unpacked (`make nginx`)")

NAMES = ("web.agentd.test", "api.agentd.test")


@dataclass
class Routed:
    address: str  # the entry point's
    tls: dict[str, Path]  # each name's CA and token
    daemons: dict[str, DaemonProcess]
    workspaces: dict[str, Path]
    env: dict[str, str]  # a laptop's client config


def _daemon(base: Path, name: str) -> tuple[DaemonProcess, Path, str]:
    tls = base / "tls"
    address = f"127.0.0.1:{free_port()}"
    made = subprocess.run(
        [sys.executable, "-m", "agentd", "tls", "init", "--dir", str(tls)]
        + ["--listen", address, "--name", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    lines = [ln for ln in made.stdout.splitlines() if ln.startswith(("tcp_listen", "tls_", "tok"))]
    (base / "agentd.toml").write_text("\n".join(lines) + "\n")
    return start_daemon(base / "d", ["--config", str(base / "agentd.toml")]), tls, address


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routed]:
    base = tmp_path_factory.mktemp("routed")
    daemons: dict[str, DaemonProcess] = {}
    tls: dict[str, Path] = {}
    upstreams: dict[str, str] = {}
    workspaces: dict[str, Path] = {}
    try:
        for name in NAMES:
            daemons[name], tls[name], upstreams[name] = _daemon(base / name, name)
            workspaces[name] = reachable_workspace()
            (workspaces[name] / "which.txt").write_text(f"the workspace of {name}\n")
        with router(base / "router", upstreams) as address:
            env = {"AGENTD_CLIENT_CONFIG": str(base / "laptop" / "client.toml")}
            yield Routed(address, tls, daemons, workspaces, env)
    finally:
        for daemon in daemons.values():
            daemon.stop()


def test_each_context_reaches_its_own_daemon_through_one_entry_point(routed: Routed) -> None:
    for name in NAMES:
        context = name.split(".")[0]
        added = ctl.run(
            "context", "add", context, "--address", routed.address, "--server-name", name,
            "--ca", str(routed.tls[name] / "ca.pem"),
            "--token-file", str(routed.tls[name] / "token"), "--json",
            env=routed.env,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["server_name"] == name
    for name in NAMES:
        context = name.split(".")[0]
        status = ctl.run("--context", context, "status", "--json", env=routed.env)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == routed.daemons[name].proc.pid
        new = ctl.run(
            "--context", context, "session", "new", "--name", context,
            "--workspace", str(routed.workspaces[name]), "--mode", "bypassPermissions",
            env=routed.env,
        )  # fmt: skip
        assert new.returncode == 0, new.stderr
        read = ctl.run(
            "--context", context, "call", "-s", context, "Read",
            '{"file_path": "which.txt"}', env=routed.env,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr
        assert read.stdout.startswith(f"1\tthe workspace of {name}"), read.stdout
    listed = ctl.run("context", "ls", env=routed.env)
    assert f"web.agentd.test via {routed.address}" in listed.stdout


def test_a_name_no_route_lists_reaches_no_daemon(routed: Routed, tmp_path: Path) -> None:
    name = NAMES[0]
    common = ["--address", routed.address, "--ca", str(routed.tls[name] / "ca.pem")]
    common += ["--token-file", str(routed.tls[name] / "token")]
    unknown = ctl.run(*common, "--server-name", "nobody.agentd.test", "status")
    assert unknown.returncode == 2, unknown.stdout
    ctl.one_line(unknown.stderr)
    # The route is by name only: another daemon's name with this one's CA is refused
    # by TLS (that daemon's certificate is not signed by this CA), not answered.
    crossed = ctl.run(*common, "--server-name", NAMES[1], "status")
    assert crossed.returncode == 2, crossed.stdout
    # Without a server name, the entry point's own address is the name: no route.
    plain = ctl.run(*common, "status")
    assert plain.returncode == 2, plain.stdout


def test_a_server_name_is_checked_and_goes_with_an_address(tmp_path: Path) -> None:
    env = {"AGENTD_CLIENT_CONFIG": str(tmp_path / "client.toml")}
    token = tmp_path / "token"
    token.write_text("t\n")
    token.chmod(0o600)
    bad = ctl.run(
        "context", "add", "x", "--address", "h:1", "--token-file", str(token),
        "--server-name", "a b", env=env,
    )  # fmt: skip
    assert bad.returncode == 64 and "--server-name" in ctl.one_line(bad.stderr)
    flag = ctl.run("--address", "h:1", "--server-name", "a/b", "status", env=env)
    assert flag.returncode == 64 and "--server-name" in ctl.one_line(flag.stderr)
    alone = ctl.run("context", "add", "x", "--socket", "/s", "--server-name", "a.b", env=env)
    assert alone.returncode == 64 and "--address" in ctl.one_line(alone.stderr)
