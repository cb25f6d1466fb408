"""Presets a person turns on for a session from agentctl (live, real pip against a
loopback index named pypi.org by the daemon's resolver map), the network settings a
SIGHUP reloads, and refusals whose advice is true for each case."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client
from tests.network import servers
from tests.network.support import Origin
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon

pytestmark = pytest.mark.timeout(300)

LOOPBACK = "loop-by-rule.test"  # resolves to 127.0.0.1, not a listed private host
RELOADED = "reloaded.test"  # private-listed, allowed only once a reload says so
CONFIG = (
    'network_resolve = {{ "pypi.org" = ["127.0.0.1"], "files.pythonhosted.org" = '
    f'["127.0.0.1"], "{LOOPBACK}" = ["127.0.0.1"], "{RELOADED}" = ["127.0.0.1"] }}}}\n'
    f'network_allow_private_hosts = ["pypi.org", "files.pythonhosted.org", "{RELOADED}"]\n'
    "network_allowed_domains = [{allowed}]\n"
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("agentd-presets")
    (base / "config.toml").write_text(CONFIG.format(allowed=""))
    proc = start_daemon(base / "d", ["--config", str(base / "config.toml")])
    proc.config = base / "config.toml"  # type: ignore[attr-defined]
    yield proc
    assert proc.stop() == 0, proc.log
    assert "Traceback" not in proc.log, proc.log


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client(daemon.socket, timeout=240) as c:
        yield c


def bash(client: Client, sid: str, command: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command, "timeout": 240_000}).text


def _refused_note(text: str) -> str:
    assert "The sandbox's network proxy refused connections" in text, text
    return text.split("The sandbox's network proxy refused connections", 1)[1]


def test_a_preset_from_agentctl_lets_pip_install_at_once(
    daemon: DaemonProcess, client: Client, net_workspace: Path, tmp_path: Path
) -> None:
    sock = ["--socket", daemon.socket]
    sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    servers.wheel(tmp_path, "agentdpresetdemo", "1.0.0")
    with servers.static(tmp_path) as port:
        install = (
            "python3 -m pip install --no-cache-dir --break-system-packages --target site "
            f"--index-url http://pypi.org:{port}/simple/ --trusted-host pypi.org "
            "agentdpresetdemo 2>&1; echo RC=$?"
        )
        refused = bash(client, sid, install)
        assert "RC=1" in refused, refused
        # pip is told once: a refusal over plain http is a 403 it does not retry.
        assert "Retrying" not in refused, refused
        note = _refused_note(refused)
        assert f"pypi.org:{port}" in note and "WebFetch(domain:pypi.org) rule" in note, note

        unknown = ctl.run("network", "--session", sid, "--preset", "pypy", *sock)
        assert unknown.returncode != 0 and "no network preset 'pypy'" in unknown.stderr
        assert "pypi" in unknown.stderr and "npm" in unknown.stderr, unknown.stderr
        added = ctl.run("network", "--session", sid, "--preset", "pypi", "--json", *sock)
        assert added.returncode == 0, added.stderr
        assert "WebFetch(preset:pypi)" in json.loads(added.stdout)["domain_rules"]

        out = bash(
            client,
            sid,
            install + " && PYTHONPATH=site python3 -c "
            "'import agentdpresetdemo; print(agentdpresetdemo.VALUE)'",
        )
    assert "from-agentdpresetdemo-1.0.0" in out, out
    shown = ctl.run("network", "--session", sid, *sock).stdout
    assert "allow WebFetch(preset:pypi)" in shown, shown
    assert f"pypi.org:{port}: allowed" in shown and "WebFetch(preset:pypi)" in shown, shown


def test_a_private_address_is_not_advised_a_rule(
    client: Client, net_workspace: Path, origin: Origin
) -> None:
    """A host a rule already allows, which resolves inside the machine, and an internal
    address: no rule would let either through, so neither refusal advises one."""
    sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    client.update_permissions(sid, allow=[f"WebFetch(domain:{LOOPBACK})"])
    for url, host in (
        (f"http://{LOOPBACK}:{origin.port}/", LOOPBACK),
        (f"http://127.0.0.1:{origin.port}/", "127.0.0.1"),
    ):
        out = bash(client, sid, f"curl -sS --max-time 60 {url}; echo RC=$?")
        assert "ORIGIN-REACHED" not in out, out
        assert "agentd refused the connection" in out and "To allow it" not in out, out
        note = _refused_note(out)
        assert f"{host}:{origin.port}" in note and "network_allow_private_hosts" in note, note
        assert "would allow it" not in note, note


def test_sighup_reloads_the_network_settings(
    daemon: DaemonProcess, client: Client, net_workspace: Path, origin: Origin
) -> None:
    sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    url = f"http://{RELOADED}:{origin.port}/"
    assert "ORIGIN-REACHED" not in bash(client, sid, f"curl -sS --max-time 60 {url}")
    config: Path = daemon.config  # type: ignore[attr-defined]
    config.write_text(CONFIG.format(allowed=f'"{RELOADED}"'))
    mark = len(daemon.log_lines)
    daemon.proc.send_signal(signal.SIGHUP)
    line = daemon.wait_for_log("reloaded:", after=mark)
    assert "network_allowed_domains" in line and "restart" not in line, line
    try:
        assert "ORIGIN-REACHED" in bash(client, sid, f"curl -sS --max-time 60 {url}")
    finally:
        config.write_text(CONFIG.format(allowed=""))
        mark = len(daemon.log_lines)
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for_log("reloaded:", after=mark)


def test_a_command_moved_to_the_background_keeps_its_refused_hosts_note(
    client: Client, net_workspace: Path, origin: Origin
) -> None:
    sid = client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    command = f"curl -sS --max-time 60 http://unlisted-host.test:{origin.port}/; sleep 60"
    r = client.run_tool(sid, "Bash", {"command": command, "timeout": 5_000})
    assert "moved to the background" in r.text, r.text
    assert f"unlisted-host.test:{origin.port}" in _refused_note(r.text), r.text
