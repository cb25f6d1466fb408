"""agentd/network/loop.py: a service's loop serves in its own thread, its decisions run
on the daemon's loop, and `stop` ends every connection it serves."""

from __future__ import annotations

import asyncio
import threading

from agentd.network.loop import ServiceLoop


async def test_served_on_its_own_thread_decided_on_the_daemons() -> None:
    daemon = asyncio.get_running_loop()
    served = ServiceLoop("test-service", daemon)
    threads: dict[str, int] = {}
    ended = threading.Event()

    async def decide() -> str:
        threads["decision"] = threading.get_ident()
        return "allowed"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        threads["connection"] = threading.get_ident()
        try:
            writer.write((await served.on_daemon(decide())).encode() + b"\n")
            await writer.drain()
            await reader.read()  # held open until the service stops
        finally:
            ended.set()
            writer.close()

    async def start() -> asyncio.Server:
        return await asyncio.start_server(handle, "127.0.0.1", 0)

    try:
        server = await asyncio.wrap_future(served.submit(start()))
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.readline() == b"allowed\n"
        assert threads["decision"] == threading.get_ident()
        assert threads["connection"] not in (threading.get_ident(), None)
        served.call(server.close)
    finally:
        await asyncio.to_thread(served.stop)
    assert ended.is_set()  # the held connection was ended by stop
    assert served.loop.is_closed()
    assert await reader.read() == b""
    writer.close()
    served.stop()  # a second stop is nothing


def test_a_record_after_the_daemons_loop_closed_is_dropped() -> None:
    daemon = asyncio.new_event_loop()
    served = ServiceLoop("test-service", daemon)
    try:
        daemon.close()
        served.to_daemon(print, "never")
    finally:
        served.stop()
