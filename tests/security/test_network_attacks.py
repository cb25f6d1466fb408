"""Attacks on a proxied session's way out, each through the real daemon, each run
inside the sandbox behind the guard (tests/sandbox/guard.py).

A proxied sandbox has its session's network namespace: nothing but loopback, where the
daemon's proxy listens. Every test asserts the proxy's own answer (a 403 naming the
host, a SOCKS refusal code) or, for what must have no route at all, that an allowed
host is reachable through the proxy in the same command: without the proxy (main
before it) each of them fails.
"""

from __future__ import annotations

import socket
import uuid

import pytest

from agentd_client import Client
from tests.network import support
from tests.network.support import (
    ALLOWED,
    LOOPBACK_LISTED,
    METADATA_LISTED,
    OTHER_ONLY,
    PROBE,
    UNLISTED,
    Origin,
)
from tests.sandbox._sandbox_attack import bash, guarded_py, guarded_sh
from tests.support.daemon import DaemonProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

origin = support.origin
proxied_daemon = support.proxied_daemon
net_workspace = support.net_workspace


@pytest.fixture
def net_client(proxied_daemon: DaemonProcess) -> Client:
    with Client(proxied_daemon.socket, timeout=120) as c:
        yield c


@pytest.fixture
def net_session(net_client: Client, net_workspace) -> str:
    # bypassPermissions asks nobody: an unknown host is refused at once.
    return net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id


def probe(client: Client, sid: str, *args: str) -> str:
    return bash(client, sid, guarded_py(PROBE, *args)).text


def refused(text: str, host: str) -> bool:
    return "403 Forbidden" in text and f"X-Agentd-Refused: {host}" in text


def test_the_allowed_host_is_reached_through_the_proxy(net_client, net_session, origin):
    """The control: CONNECT and a forward request to an allowed host reach it."""
    out = probe(net_client, net_session, "connect", ALLOWED, str(origin.port))
    assert "200 Connection Established" in out and "ORIGIN-REACHED" in out, out
    out = probe(
        net_client,
        net_session,
        "forward",
        f"http://{ALLOWED}:{origin.port}/",
        f"{ALLOWED}:{origin.port}",
    )
    assert "ORIGIN-REACHED" in out, out


def test_connect_to_an_unlisted_host_is_refused(net_client, net_session, origin: Origin):
    out = probe(net_client, net_session, "connect", UNLISTED, str(origin.port))
    assert refused(out, UNLISTED), out
    assert "ORIGIN-REACHED" not in out
    # The body names the host and the entry that would allow it.
    assert f"{UNLISTED}:{origin.port}" in out and "allowedDomains" in out, out


# Loopback spelled every way the C resolver reads it, and as IPv6 and IPv4-mapped IPv6.
LITERALS = ["127.0.0.1", "2130706433", "0x7f.1", "127.1", "[::1]", "[::ffff:127.0.0.1]"]


@pytest.mark.parametrize("literal", [*LITERALS, "[::ffff:7f00:1]"])
def test_connect_to_an_ip_literal_is_refused(net_client, net_session, origin, literal):
    out = probe(net_client, net_session, "connect", literal, str(origin.port))
    assert "403 Forbidden" in out and "ORIGIN-REACHED" not in out, out
    assert "IP address" in out, out


@pytest.mark.parametrize(
    ("host", "why"), [(LOOPBACK_LISTED, "loopback"), (METADATA_LISTED, "metadata")]
)
def test_a_listed_name_resolving_inside_is_refused(net_client, net_session, origin, host, why):
    out = probe(net_client, net_session, "connect", host, str(origin.port))
    assert refused(out, host) and why in out, out
    assert "ORIGIN-REACHED" not in out


def test_a_host_header_other_than_the_request_line_is_refused(
    net_client, net_session, origin: Origin
):
    before = list(origin.seen)
    # Decided on the allowed host, served by another: refused before anything is sent.
    out = probe(
        net_client,
        net_session,
        "forward",
        f"http://{ALLOWED}:{origin.port}/",
        f"{UNLISTED}:{origin.port}",
    )
    assert "400 Bad Request" in out and "Host header" in out, out
    # The other way round: the same (the proxy decides on one host, never two).
    out = probe(
        net_client,
        net_session,
        "forward",
        f"http://{UNLISTED}:{origin.port}/",
        f"{ALLOWED}:{origin.port}",
    )
    assert "400 Bad Request" in out and "Host header" in out, out
    assert origin.seen == before


RELAY = r"""
import socket, sys, threading
# A second hop inside the sandbox: a relay on another loopback port to the proxy.
hop = socket.create_server(("127.0.0.1", 0)); port = hop.getsockname()[1]
def serve():
    c, _ = hop.accept(); up = socket.create_connection(("127.0.0.1", 3128))
    def pump(a, b):
        while (d := a.recv(65536)):
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    threading.Thread(target=pump, args=(up, c), daemon=True).start(); pump(c, up)
threading.Thread(target=serve, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
host = sys.argv[1]
s.sendall(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
print(s.recv(65536).decode(errors="replace"))
"""


def test_a_second_hop_inside_the_sandbox_changes_nothing(net_client, net_session, origin):
    out = bash(net_client, net_session, guarded_py(RELAY, f"{UNLISTED}:{origin.port}")).text
    assert refused(out, UNLISTED), out
    out = bash(net_client, net_session, guarded_py(RELAY, f"{ALLOWED}:{origin.port}")).text
    assert "200 Connection Established" in out, out


@pytest.mark.parametrize(
    ("kind", "address"),
    [
        ("domain", UNLISTED),
        ("domain", LOOPBACK_LISTED),
        ("v4", "127.0.0.1"),
        ("v6", "::1"),
        ("v6", "::ffff:127.0.0.1"),
        ("domain", "169.254.169.254"),
    ],
)
def test_socks5_to_what_is_not_allowed_is_refused(net_client, net_session, origin, kind, address):
    out = probe(net_client, net_session, "socks", kind, address, str(origin.port))
    assert "SOCKS-REPLY 2" in out, out  # "connection not allowed by ruleset"
    assert "ORIGIN-REACHED" not in out


def test_socks5_to_an_allowed_host_works(net_client, net_session, origin):
    out = probe(net_client, net_session, "socks", "domain", ALLOWED, str(origin.port))
    assert "SOCKS-REPLY 0" in out and "ORIGIN-REACHED" in out, out


NO_ROUTE = r"""
import socket, sys
port, abstract = int(sys.argv[1]), sys.argv[2]
def attempt(name, fn):
    try:
        fn(); print(name, "REACHED")
    except OSError as e:
        print(name, "BLOCKED", e.errno)
def udp_out():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("1.1.1.1", 53))
def udp_host():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"FROM-SANDBOX", ("127.0.0.1", port))
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def tcp_host():
    socket.create_connection(("127.0.0.1", port), timeout=3)
def abstract_unix():
    socket.socket(socket.AF_UNIX).connect("\0" + abstract)
def outside():
    socket.create_connection(("1.1.1.1", 443), timeout=3)
def dns():
    socket.getaddrinfo("example.com", 443)
for name, fn in [("udp_out", udp_out), ("udp_host", udp_host), ("raw", raw),
                 ("tcp_host", tcp_host), ("abstract", abstract_unix), ("outside", outside),
                 ("dns", dns)]:
    attempt(name, fn)
"""


def test_udp_raw_sockets_and_abstract_sockets_have_no_route(net_client, net_session, origin):
    """Only the proxy is reachable: UDP, raw sockets, the host's loopback and its
    abstract unix sockets are not, while an allowed host is, in the same sandbox."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    name = f"agentd-net-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + name)
    abstract.listen()
    tcp = socket.create_server(("127.0.0.1", 0))
    try:
        port = str(udp.getsockname()[1])
        out = bash(net_client, net_session, guarded_py(NO_ROUTE, port, name)).text
        for what in ("raw", "abstract", "outside", "dns", "udp_out"):
            assert f"{what} BLOCKED" in out, out
        out_tcp = bash(
            net_client, net_session, guarded_py(NO_ROUTE, str(tcp.getsockname()[1]), name)
        ).text
        assert "tcp_host BLOCKED" in out_tcp, out_tcp
        with pytest.raises(BlockingIOError):
            udp.recv(100)  # the datagram went to the sandbox's own loopback, if anywhere
        control = probe(net_client, net_session, "connect", ALLOWED, str(origin.port))
        assert "ORIGIN-REACHED" in control, control
    finally:
        udp.close()
        abstract.close()
        tcp.close()


def test_another_sessions_proxy_is_out_of_reach(net_client, net_workspace, origin):
    """Session A may reach a host by its own rule; session B's sandbox reaches only its
    own proxy (its own namespace), which refuses it."""
    a = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    b = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    net_client.update_permissions(a, allow=[f"WebFetch(domain:{OTHER_ONLY})"])
    out_a = probe(net_client, a, "connect", OTHER_ONLY, str(origin.port))
    assert "ORIGIN-REACHED" in out_a, out_a
    out_b = probe(net_client, b, "connect", OTHER_ONLY, str(origin.port))
    assert refused(out_b, OTHER_ONLY), out_b
    # B's loopback holds B's proxy only: the ports A's listens on are B's own proxy.
    ns_a = bash(net_client, a, guarded_sh("readlink /proc/self/ns/net")).text
    ns_b = bash(net_client, b, guarded_sh("readlink /proc/self/ns/net")).text
    assert "net:[" in ns_a and ns_a.split("net:[")[1][:12] != ns_b.split("net:[")[1][:12]


FLOOD = r"""
import socket, sys, time
held = []
for i in range(int(sys.argv[1])):
    try:
        held.append(socket.create_connection(("127.0.0.1", 3128), timeout=5))
    except OSError:
        pass
print("HOLDING", len(held), flush=True)
time.sleep(600)
"""


def test_a_flood_from_one_session_leaves_others_and_the_daemon_responsive(
    net_client, net_workspace, origin
):
    flooder = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    other = net_client.create_session(str(net_workspace), permission_mode="bypassPermissions").id
    call_id = f"toolu_flood_{uuid.uuid4().hex[:8]}"
    command = guarded_py(FLOOD, "3000")
    r = net_client.run_tool(
        flooder, "Bash", {"command": command, "run_in_background": True}, call_id
    )
    assert not r.is_error, r.text

    def holding() -> str:
        chunks = net_client.read_output(flooder, call_id)
        text = b"".join(c.data for c in chunks).decode(errors="replace")
        return text if "HOLDING" in text else ""

    try:
        said = wait_until(holding, timeout=120, what="the flood to hold its connections")
        assert "NOT SANDBOXED" not in said
        # Meanwhile: the daemon answers, and another session's proxy serves it.
        assert net_client.status().open_sessions >= 2
        out = probe(net_client, other, "connect", ALLOWED, str(origin.port))
        assert "ORIGIN-REACHED" in out, out
    finally:
        net_client.close_session(flooder)
