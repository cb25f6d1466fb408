"""With network off, no socket reaches the host: TCP, UDP, DNS, abstract unix sockets."""

from __future__ import annotations

import os
import socket
import uuid

from .conftest import policy, run_capture

PROBE = """
import socket, sys
port, abstract, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def attempt(name, fn):
    try:
        fn(); print(name, "REACHED")
    except OSError as e:
        print(name, "BLOCKED", e.errno)
def tcp():
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"hello-from-sandbox", ("127.0.0.1", port + 1))
def dns():
    socket.getaddrinfo("example.com", 80)
def outside():
    socket.create_connection(("1.1.1.1", 53), timeout=2)
def abstract_unix():
    s = socket.socket(socket.AF_UNIX); s.connect("\\0" + abstract)
def path_unix():
    s = socket.socket(socket.AF_UNIX); s.connect(path)
for name, fn in [("tcp", tcp), ("udp", udp), ("dns", dns), ("outside", outside),
                 ("abstract", abstract_unix), ("path", path_unix)]:
    attempt(name, fn)
"""


async def test_network_off_reaches_nothing_on_host(ws, guarded_py):
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port + 1))
    udp.setblocking(False)
    abstract_name = f"agentd-sbx-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen()
    # A host service's socket (root-owned, group-only) inside the writable workspace:
    # the sandbox has no supplementary groups, so it cannot connect.
    path = os.path.join(ws, "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    os.chmod(path, 0o660)
    unix.listen()
    try:
        res = await run_capture(policy(ws), guarded_py(PROBE, str(port), abstract_name, path))
        assert res.rc == 0, res.err
        for name in ("tcp", "dns", "outside", "abstract", "path"):
            assert f"{name} BLOCKED" in res.out, res.out
        # The UDP send may "succeed" into the sandbox's own loopback; it must not arrive.
        try:
            data = udp.recv(100)
        except BlockingIOError:
            data = None
        assert data is None
    finally:
        for s in (tcp, udp, abstract, unix):
            s.close()


async def test_network_on_reaches_host_loopback(ws, guarded_py):
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    try:
        code = "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])))"
        res = await run_capture(policy(ws, network=True), guarded_py(code, str(port)))
        assert res.rc == 0, res.err
    finally:
        tcp.close()
