"""An unknown host asks a person on every attached terminal, as a Bash ask does; the
answer reaches all of them; rules by name come from the config, the session and the
workspace's settings (whose allowedDomains apply only to trusted content)."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from tests.network.support import ALLOWED, ASKED, Origin
from tests.support import ctl
from tests.support.daemon import DaemonProcess

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def net_client(proxied_daemon: DaemonProcess):
    with Client(proxied_daemon.socket, timeout=120) as c:
        yield c


def new_session(client: Client, workspace: Path, mode: str = "") -> str:
    """A session whose curl runs without a Bash ask: what is asked is the host only."""
    sid = client.create_session(str(workspace), permission_mode=mode).id
    client.update_permissions(sid, allow=["Bash(curl:*)"])
    return sid


def curl(client: Client, sid: str, url: str) -> str:
    r = client.run_tool(sid, "Bash", {"command": f"curl -sS --max-time 60 {url}"})
    return r.text


class Terminal:
    """An attached client that records what it sees and may answer asks."""

    def __init__(self, client: Client, sid: str, answer: tuple[str, str] | None) -> None:
        self.client, self.sid, self.answer = client, sid, answer
        self.requested: list[Any] = []
        self.resolved: list[Any] = []
        self.replies: list[Any] = []
        self.stream = client.attach(sid)
        assert self.stream.wait_attached()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        network_ids: set[str] = set()
        try:
            for event in self.stream:
                kind = event.WhichOneof("kind")
                if kind == "permission_requested":
                    req = event.permission_requested
                    if req.tool_name != "Network":
                        # The Bash call's own ask (curl reaches the network): allowed.
                        if self.answer is not None:
                            self.client.resolve_permission(self.sid, req.request_id, "allow")
                        continue
                    network_ids.add(req.request_id)
                    self.requested.append(req)
                    if self.answer is not None:
                        decision, scope = self.answer
                        self.replies.append(
                            self.client.resolve_permission(
                                self.sid, req.request_id, decision, scope
                            )
                        )
                elif (
                    kind == "permission_resolved"
                    and event.permission_resolved.request_id in network_ids
                ):
                    self.resolved.append(event.permission_resolved)
        except Exception:
            return

    def close(self) -> None:
        self.stream.cancel()
        self.thread.join(30)


def test_an_unknown_host_asks_every_terminal_and_the_first_answer_wins(
    net_client: Client, net_workspace: Path, origin: Origin
):
    sid = new_session(net_client, net_workspace)
    answering = Terminal(net_client, sid, ("allow", "once"))
    watching = Terminal(net_client, sid, None)
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    answering.close()
    watching.close()
    assert "ORIGIN-REACHED" in out, out
    for term in (answering, watching):
        (req,) = term.requested
        assert req.tool_name == "Network"
        assert req.input["host"] == ASKED and int(req.input["port"]) == origin.port
        assert any(f"{ASKED}:{origin.port}" in r for r in req.reasons), req.reasons
        assert req.suggested_rule == f"WebFetch(domain:{ASKED})"
        (res,) = term.resolved
        assert res.decision == "allow" and res.scope == "once"
    # once: nothing was added; a later connection asks again (nobody attached: refused).
    assert f"WebFetch(domain:{ASKED})" not in net_client.get_session(sid).allow_rules
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    assert "403" in out or "refused" in out, out
    assert "no person is attached" in out, out


def test_always_adds_the_rule_and_a_refusal_is_shown(
    net_client: Client, net_workspace: Path, origin: Origin
):
    sid = new_session(net_client, net_workspace)
    term = Terminal(net_client, sid, ("deny", "once"))
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    term.close()
    assert "agentd refused the connection" in out and "refused by" in out, out
    assert "ORIGIN-REACHED" not in out
    # The model is told which host was refused and why.
    assert f"{ASKED}:{origin.port}" in out.split("proxy refused")[-1], out
    term = Terminal(net_client, sid, ("allow", "always"))
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    term.close()
    assert "ORIGIN-REACHED" in out, out
    assert f"WebFetch(domain:{ASKED})" in net_client.get_session(sid).allow_rules
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")  # nobody attached now
    assert "ORIGIN-REACHED" in out, out


def test_nobody_attached_or_a_mode_that_does_not_ask_refuses_at_once(
    net_client: Client, net_workspace: Path, origin: Origin
):
    sid = new_session(net_client, net_workspace)
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    assert "no person is attached" in out, out
    quiet = new_session(net_client, net_workspace, "dontAsk")
    watcher = Terminal(net_client, quiet, ("allow", "once"))
    out = curl(net_client, quiet, f"http://{ASKED}:{origin.port}/")
    watcher.stream.cancel()
    assert "asks nobody" in out and watcher.requested == [], out


def _settings(root: Path, body: dict[str, Any]) -> tuple[str, str]:
    path = root / ".claude" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    data = json.dumps(body).encode()
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def test_workspace_allowed_domains_apply_only_once_trusted(
    net_client: Client, net_workspace: Path, origin: Origin
):
    path, digest = _settings(
        net_workspace, {"sandbox": {"network": {"allowedDomains": [f"{ASKED}"]}}}
    )
    sid = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    assert "ORIGIN-REACHED" not in out and "refused" in out, out
    net_client.approve_trust(path, digest)
    try:
        out = curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
        assert "ORIGIN-REACHED" in out, out
    finally:
        net_client.revoke_trust(path)


def test_workspace_denied_domains_apply_untrusted_and_deny_wins(
    net_client: Client, net_workspace: Path, origin: Origin
):
    _settings(net_workspace, {"sandbox": {"network": {"deniedDomains": [ALLOWED]}}})
    sid = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    # ALLOWED is allowed by the daemon's config; the workspace's deny still wins.
    out = curl(net_client, sid, f"http://{ALLOWED}:{origin.port}/")
    assert "denied by" in out and "ORIGIN-REACHED" not in out, out


def test_session_deny_rule_wins_over_the_config(
    net_client: Client, net_workspace: Path, origin: Origin
):
    sid = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    assert "ORIGIN-REACHED" in curl(net_client, sid, f"http://{ALLOWED}:{origin.port}/")
    net_client.update_permissions(sid, deny=[f"WebFetch(domain:{ALLOWED})"])
    out = curl(net_client, sid, f"http://{ALLOWED}:{origin.port}/")
    assert "denied by WebFetch" in out, out


def test_off_and_on_stay_available(net_client: Client, net_workspace: Path, origin: Origin):
    """allow_network=True is "on" (the host's network, unfiltered); proxied is the
    default for a client that says nothing."""
    on = net_client.create_session(
        str(net_workspace), allow_network=True, permission_mode="bypassPermissions"
    )
    out = net_client.run_tool(
        on.id, "Bash", {"command": f"curl -sS --noproxy '*' http://127.0.0.1:{origin.port}/"}
    ).text
    assert "ORIGIN-REACHED" in out, out
    proxied = new_session(net_client, net_workspace)
    assert net_client.get_session(proxied).allow_network is False
    out = curl(net_client, proxied, f"-w %{{http_connect}} http://{ALLOWED}:{origin.port}/")
    assert "ORIGIN-REACHED" in out, out
    # A command the classifier finds read-only runs with no network at all.
    out = net_client.run_tool(proxied, "Bash", {"command": "echo proxy=$HTTPS_PROXY"}).text
    assert "proxy=\n" in out + "\n" and "3128" not in out, out


def test_agentctl_network_allows_and_denies_live_and_shows_what_was_decided(
    proxied_daemon: DaemonProcess, net_client: Client, net_workspace: Path, origin: Origin
):
    sock = ["--socket", proxied_daemon.socket]
    made = ctl.run(
        "session",
        "new",
        "--workspace",
        str(net_workspace),
        "--mode",
        "bypassPermissions",
        "--network",
        "proxied",
        "--json",
        *sock,
    )
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout)["id"]
    assert "refused" in curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    allowed = ctl.run("network", "--session", sid, "--allow", ASKED, "--json", *sock)
    assert allowed.returncode == 0, allowed.stderr
    assert f"WebFetch(domain:{ASKED})" in json.loads(allowed.stdout)["domain_rules"]
    assert "ORIGIN-REACHED" in curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    shown = json.loads(ctl.run("network", "--session", sid, "--json", *sock).stdout)
    assert shown["network"] == "proxied"
    host = shown["hosts"][f"{ASKED}:{origin.port}"]
    assert host["decision"] == "allowed" and host["connections"] >= 1, shown
    denied = ctl.run("network", "--session", sid, "--deny", ASKED, *sock)
    assert denied.returncode == 0 and f"deny  WebFetch(domain:{ASKED})" in denied.stdout
    assert "denied by" in curl(net_client, sid, f"http://{ASKED}:{origin.port}/")
    off = ctl.run(
        "session",
        "new",
        "--workspace",
        str(net_workspace),
        "--network",
        "off",
        "--mode",
        "bypassPermissions",
        "--json",
        *sock,
    )
    off_id = json.loads(off.stdout)["id"]
    out = curl(net_client, off_id, f"http://{ALLOWED}:{origin.port}/")
    assert "ORIGIN-REACHED" not in out and "Could not resolve proxy" not in out, out
