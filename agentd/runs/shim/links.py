"""Terminal clients the daemon handed to the shim (LINK): a keystroke and its echo go
client -> shim -> PTY -> shim -> client, without the daemon's process on the way.

The daemon checked the client's token and hands over its connection (SCM_RIGHTS) only
when it is caught up, has nothing queued and nothing unsent. The shim then takes INPUT
frames from it (agentd_client/core/terminal_wire.py) and sends it the terminal's output
as OUTPUT frames with their offsets. Anything else it hands back to the daemon at once,
with the connection, the offset reached, the bytes it wrote, the client's bytes not yet
taken and an output frame's unsent rest, so the daemon goes on exactly there:
- any other frame (a resize, close-stdin, detach) or a malformed one;
- a client that does not read (a send that would block: never wait for it);
- input piling up past LINK_PENDING (the daemon's window then holds the client back);
- output the file's head no longer holds (the daemon reads the file);
- the run's end (the daemon sends the rest and END).
A client gone (EOF, an error) is reported without a connection. A link dies with the
controller that made it.
"""

from __future__ import annotations

import array
import base64
import contextlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from agentd_client.core import terminal_wire as wire

# Bytes read from a client at a time, and most bytes of output per OUTPUT frame: what a
# hand-back carries fits one control message.
LINK_READ = 1 << 14
# Input queued for the terminal past which the client goes back to the daemon.
LINK_PENDING = 1 << 16


@dataclass
class Link:
    id: int
    sock: socket.socket
    controller: socket.socket
    offset: int  # the next output byte the client is sent
    written: int = 0  # input bytes written to the terminal for it
    buf: bytearray = field(default_factory=bytearray)  # the client's bytes not yet taken


class Links:
    def __init__(
        self,
        register: Callable[[socket.socket, Link], object],
        unregister: Callable[[socket.socket], object],
        write_input: Callable[[bytes], int],
        pending: Callable[[], int],
        file_bytes: Callable[[int, int], bytes | None],
    ) -> None:
        self._register = register
        self._unregister = unregister
        self._write_input = write_input
        self._pending = pending
        self._file_bytes = file_bytes
        self.links: list[Link] = []

    def add(self, controller: socket.socket, link_id: int, fd: int, offset: int, size: int) -> None:
        """A client handed over at `offset` (the output is at `size` now)."""
        sock = socket.socket(fileno=fd)
        sock.setblocking(False)
        link = Link(link_id, sock, controller, offset)
        self.links.append(link)
        self._register(sock, link)
        if offset < size:  # written since the daemon sent it: from the file, if held
            data = self._file_bytes(offset, size)
            if data is None:
                self.hand_back(link)
            else:
                self._send(link, offset, data)

    def output(self, at: int, chunk: bytes) -> None:
        """The terminal's output at `at`, to every linked client."""
        for link in list(self.links):
            if link.offset != at:
                self.hand_back(link)
            else:
                self._send(link, at, chunk)

    def _send(self, link: Link, at: int, data: bytes) -> None:
        for start in range(0, len(data), LINK_READ):
            part = data[start : start + LINK_READ]
            frame = wire.output(at + start, part)
            try:
                sent = link.sock.send(frame)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.gone(link, "dropped")
                return
            if sent < len(frame):
                link.offset = at + start + len(part)
                self.hand_back(link, unsent=frame[sent:])
                return
        link.offset = at + len(data)

    def readable(self, link: Link) -> None:
        try:
            data = link.sock.recv(LINK_READ)
        except BlockingIOError:
            return
        except OSError:
            self.gone(link, "dropped")
            return
        if not data:
            self.gone(link, "closed")
            return
        buf = link.buf
        buf += data
        at = 0
        while len(buf) - at >= wire.HEADER.size:
            kind, size = wire.HEADER.unpack_from(buf, at)
            if kind != wire.INPUT or size > LINK_READ or self._pending() > LINK_PENDING:
                del buf[:at]
                self.hand_back(link)  # from this frame on, the daemon's to read
                return
            if len(buf) - at - wire.HEADER.size < size:
                break
            start = at + wire.HEADER.size
            link.written += self._write_input(bytes(buf[start : start + size]))
            at = start + size
        del buf[:at]

    def hand_back(self, link: Link, *, unsent: bytes = b"") -> None:
        """The client back to the daemon: its connection, where it is, what is not done
        (the client's bytes not taken, an output frame's unsent rest)."""
        body = {
            "ev": "unlinked",
            "link": link.id,
            "offset": link.offset,
            "bytes": link.written,
            "reason": "back",
            "rest": base64.b64encode(link.buf).decode(),
            "unsent": base64.b64encode(unsent).decode(),
        }
        self._drop(link)
        fds = array.array("i", [link.sock.fileno()])
        try:
            link.controller.settimeout(5)
            link.controller.sendmsg(
                [json.dumps(body).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
        except OSError:
            pass  # the daemon is gone: so is the client's terminal
        finally:
            with contextlib.suppress(OSError):
                link.controller.setblocking(False)
            link.sock.close()

    def gone(self, link: Link, reason: str) -> None:
        """The client went: said to the daemon (which records it and may hang up)."""
        self._drop(link)
        link.sock.close()
        body = {"ev": "unlinked", "link": link.id, "offset": link.offset}
        body |= {"bytes": link.written, "reason": reason}
        with contextlib.suppress(OSError):
            link.controller.settimeout(5)
            link.controller.send(json.dumps(body).encode())
        with contextlib.suppress(OSError):
            link.controller.setblocking(False)

    def unlink(self, link_id: int) -> None:
        """The daemon let go of the client (its connection closed there)."""
        for link in [x for x in self.links if x.id == link_id]:
            self._drop(link)
            link.sock.close()

    def controller_gone(self, controller: socket.socket) -> None:
        for link in [x for x in self.links if x.controller is controller]:
            self._drop(link)
            link.sock.close()

    def hand_all_back(self) -> None:
        for link in list(self.links):
            self.hand_back(link)

    def _drop(self, link: Link) -> None:
        if link in self.links:
            self.links.remove(link)
            self._unregister(link.sock)


def receive_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors a control message carried."""
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return list(fds)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
