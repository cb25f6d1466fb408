"""agentd/network/ports.py: listeners read from the kernel's own tables, and the checks
on what a forward may name."""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

from agentd.foundation.errors import InvalidRequest
from agentd.network import ports


def test_listeners_are_read_from_the_kernels_tables_both_families() -> None:
    v4 = socket.create_server(("127.0.0.1", 0))
    v6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
    connected = socket.create_connection(v4.getsockname()[:2])  # established: not listed
    try:
        found = ports._read_tables()
        p4, p6 = v4.getsockname()[1], v6.getsockname()[1]
        mine = {(x.address, x.port) for x in found if x.port in (p4, p6)}
        assert mine == {("127.0.0.1", p4), ("::1", p6)}
        owners = ports.processes({x.inode for x in found if x.port == p4})
        assert any(o.startswith(f"{os.getpid()} ") for o in sum(owners.values(), []))
        assert connected.getsockname()[1] not in {x.port for x in found}
    finally:
        connected.close()
        v4.close()
        v6.close()


def test_parse_skips_what_is_not_listening_or_malformed() -> None:
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 "
        "0 4242 1 0 100 0 0 10 0\n"
        "   1: 0100007F:1F41 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000 "
        "0 4243 1 0 100 0 0 10 0\n"
        "   2: ZZZZ:1F42 00000000:0000 0A 0 0 0 0 0 0\n"
        "garbage\n"
    )
    assert ports.parse_proc_net(table) == [ports.Listener("127.0.0.1", 8000, 4242)]


@pytest.mark.parametrize("host", ["10.0.0.1", "localhost", "127.0.0.2", "::ffff:127.0.0.1"])
def test_a_forward_names_only_the_loopback(host: str) -> None:
    with pytest.raises(InvalidRequest):
        ports.checked_host(host)
    assert ports.checked_host("::1") == "::1"
    assert ports.checked_host("") == ""


@pytest.mark.parametrize("port", [0, 65536, 1 << 32])
def test_ports_out_of_range_are_refused(port: int) -> None:
    with pytest.raises(InvalidRequest):
        ports.checked_port(port)


def test_a_process_closing_descriptors_meanwhile_is_still_found() -> None:
    """Descriptors that close between the listing and the read are skipped alone: the
    listener of a busy process (a daemon's threads open and close files all the time) is
    still found."""
    # The churned descriptors take numbers below the listener's, so a scan meets them
    # (listed, then closed) before it reaches the listener.
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(64)]
    server = socket.create_server(("127.0.0.1", 0))
    for fd in held:
        os.close(fd)
    [inode] = [x.inode for x in ports._read_tables() if x.port == server.getsockname()[1]]
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(64)]
            for fd in fds:
                os.close(fd)

    thread = threading.Thread(target=churn)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the churn runs between any two reads of the scan
    thread.start()
    try:
        missed = sum(
            not any(
                o.startswith(f"{os.getpid()} ") for o in ports.processes({inode}).get(inode, [])
            )
            for _ in range(200)
        )
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
        server.close()
    assert missed == 0, f"the listener's owner was missed {missed} times in 200"
