"""Traffic both ways through a forwarded port, checked byte for byte (tests and bench).

SERVER runs in a session's sandbox (a background task): each connection sends a header
(size, seed), then both ends send `size` bytes at once; the server then sends the
sha256 of what it received and of what it sent. The client hashes both directions on
its side, so a byte lost, added, changed or moved either way fails the exchange. Every
64 KiB piece starts with its index, so pieces are not interchangeable.
"""

from __future__ import annotations

import hashlib
import random
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass

PIECE = 64 * 1024

SERVER = r"""
import hashlib, random, socket, struct, sys, threading

PIECE = 64 * 1024


def pieces(seed, size):
    base = random.Random(seed).randbytes(PIECE)
    i, left = 0, size
    while left > 0:
        p = (struct.pack(">Q", i) + base[8:])[:left]
        yield p
        left -= len(p)
        i += 1


def handle(conn):
    with conn:
        head = b""
        while len(head) < 16:
            d = conn.recv(16 - len(head))
            if not d:
                return
            head += d
        size, seed = struct.unpack(">QQ", head)
        got = hashlib.sha256()

        def receive():
            left = size
            while left:
                d = conn.recv(min(left, 1 << 20))
                if not d:
                    break
                got.update(d)
                left -= len(d)

        t = threading.Thread(target=receive)
        t.start()
        sent = hashlib.sha256()
        for p in pieces(seed ^ 0x5A5A, size):
            sent.update(p)
            conn.sendall(p)
        t.join()
        conn.sendall(got.digest() + sent.digest())


server = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=512)
print("listening", flush=True)
while True:
    c, _ = server.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""


def pieces(seed: int, size: int) -> Iterator[bytes]:
    base = random.Random(seed).randbytes(PIECE)
    i, left = 0, size
    while left > 0:
        p = (struct.pack(">Q", i) + base[8:])[:left]
        yield p
        left -= len(p)
        i += 1


@dataclass
class Exchange:
    sent_ok: bool  # the server received exactly what this side sent
    received_ok: bool  # this side received exactly what the server sent
    received: int


def exchange(sock: socket.socket, size: int, seed: int) -> Exchange:
    """`size` bytes each way over `sock` (connected to SERVER, directly or forwarded)."""
    with sock:
        sock.sendall(struct.pack(">QQ", size, seed))
        sent = hashlib.sha256()

        def send() -> None:
            for p in pieces(seed, size):
                sent.update(p)
                sock.sendall(p)

        sender = threading.Thread(target=send)
        sender.start()
        got = hashlib.sha256()
        buf = bytearray()
        total = 0
        want = size + 64
        while total < want:
            d = sock.recv(min(1 << 20, want - total))
            if not d:
                break
            if total + len(d) <= size:
                got.update(d)
            else:
                cut = max(0, size - total)
                got.update(d[:cut])
                buf += d[cut:]
            total += len(d)
        sender.join()
    if len(buf) != 64:
        return Exchange(False, False, total)
    return Exchange(bytes(buf[:32]) == sent.digest(), bytes(buf[32:]) == got.digest(), total)


# A server that sends to every connection until nobody takes more for 5 s, then notes
# it in stuck.txt: a client (or a daemon) that never reads, flooded.
FLOODS = r"""
import socket, sys, threading
server = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=1024)
print("listening", flush=True)
lock = threading.Lock()
def flood(conn):
    conn.settimeout(5)  # stuck this long: nobody takes more
    chunk = b"x" * (1 << 20)
    try:
        while True:
            conn.send(chunk)
    except OSError:
        pass
    with lock, open("stuck.txt", "a") as f:
        f.write("stuck\n")
while True:
    conn, _ = server.accept()
    threading.Thread(target=flood, args=(conn,), daemon=True).start()
"""
