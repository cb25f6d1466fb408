"""The holder of the proxies' listening sockets (agentd/foundation/holder.py): a socket put
there keeps listening while no daemon has it, the connections made meanwhile wait in its
backlog, and the next daemon takes the same socket back and accepts them; a holder left
holding nothing exits."""

from __future__ import annotations

import socket
from pathlib import Path

from agentd.foundation.holder import Holder
from tests.support.processes import processes_with, wait_gone


def test_a_held_socket_queues_connections_for_the_next_daemon(tmp_path: Path) -> None:
    first = Holder(str(tmp_path))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    first.put("s1/127.0.0.1:1", listener)
    listener.close()
    first.close()  # the daemon is gone (its copy closed with it)

    waiting = socket.create_connection(("127.0.0.1", port), timeout=10)  # not refused
    waiting.sendall(b"made while no daemon ran")

    second = Holder(str(tmp_path))
    taken = second.take("s1/127.0.0.1:1")
    assert taken is not None and taken.getsockname()[1] == port
    assert second.take("s2/127.0.0.1:1") is None
    taken.setblocking(True)
    conn, _ = taken.accept()
    with conn, waiting:
        assert conn.recv(100) == b"made while no daemon ran"
    taken.close()

    marker = str(tmp_path / "sockets-held")
    assert processes_with(marker)
    second.drop("s1/")
    second.close()  # it holds nothing now: it exits
    wait_gone(marker)
