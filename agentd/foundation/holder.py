"""Listening sockets held by a small process that outlives the daemon, so a restart
refuses no connection: the API's and the sessions' proxies'. While no daemon serves, a
client's connection waits in the socket's backlog, and the next daemon takes the same
socket back and accepts it.

The holder (`python -m agentd.foundation.holder PATH`) is started by the first daemon of a
state dir that finds none, in a session of its own, and answers on a unix socket at PATH
(in the 0700 state dir). Each request is one SOCK_SEQPACKET message, JSON with the
descriptors it carries:

    {"op": "put", "name": N}    + 1 fd   hold a copy of it under N (replacing one held);
                                         with "hold": S, for S seconds at most once
                                         its daemon is gone
    {"op": "take", "name": N}            the copy held under N (kept), or none
    {"op": "drop", "prefix": P}          close every one whose name starts with P ("": all)

It never accepts on what it holds. It exits when its daemon goes away while it holds
nothing (a daemon that stops with no task left running drops them all), when no daemon
came back for HOLD_SECONDS (the next one makes new sockets, as a first start does), or
when PATH is gone (its state dir was deleted). A socket put with a hold of its own (the
API's: its clients wait for an answer while it is held) is closed when that runs out with
no daemon back, so they are then refused, as when no daemon runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

NAME = "sockets-held"
_MAX_MESSAGE = 4096
# Seconds a client waits for the holder's answer (it answers at once, or is gone).
_ANSWER_SECONDS = 5.0
# Seconds between two looks at whether PATH is still there, while no daemon is connected.
_LOOK_SECONDS = 30.0
# Seconds the sockets are held for a daemon that does not come back.
HOLD_SECONDS = 600.0


class Holder:
    """The daemon's end: puts, takes and drops sockets; every failure is logged and
    answered as "nothing held" (the daemon then makes its sockets as before)."""

    def __init__(self, state_dir: str, spawn: bool = True) -> None:
        """`spawn`: start the holder when none answers (the daemon); else do without
        (`agentd stop --tasks`, which only lets go of what is held)."""
        self.path = os.path.join(state_dir, NAME)
        self._spawn_missing = spawn
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()  # sessions' sandboxes are prepared from threads

    def _connected(self) -> socket.socket | None:
        if self._conn is not None:
            return self._conn
        for attempt in range(2):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            conn.settimeout(_ANSWER_SECONDS)
            try:
                conn.connect(self.path)
            except OSError:
                conn.close()
                if attempt == 0 and self._spawn_missing:
                    self._spawn()
                    continue
                break
            self._conn = conn
            return conn
        if self._spawn_missing:
            log.warning("no holder of listening sockets at %s: a restart may refuse", self.path)
        return None

    def _spawn(self) -> None:
        """Start the holder and wait for its socket (a second of it at most)."""
        for stale in (self.path, self.path + ".new"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
        subprocess.Popen(
            [sys.executable, "-m", "agentd.foundation.holder", self.path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the daemon's process group: it outlives it
            close_fds=True,
        )
        deadline = time.monotonic() + 10
        while not os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(0.01)

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> list[int]:
        with self._lock:
            conn = self._connected()
            if conn is None:
                return []
            try:
                socket.send_fds(conn, [json.dumps(request).encode()], fds or [])
                _, got, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 1)
                return got
            except OSError as exc:
                log.warning("the holder of listening sockets did not answer (%s)", exc)
                conn.close()
                self._conn = None
                return []

    def put(self, name: str, sock: socket.socket | int, hold: float | None = None) -> None:
        """Hold a copy of `sock` (a socket or its descriptor) under `name`; `hold`: for
        at most that many seconds once this daemon is gone."""
        request: dict[str, Any] = {"op": "put", "name": name}
        if hold is not None:
            request["hold"] = hold
        self._ask(request, [sock if isinstance(sock, int) else sock.fileno()])

    def take(self, name: str) -> socket.socket | None:
        got = self._ask({"op": "take", "name": name})
        if not got:
            return None
        sock = socket.socket(fileno=got[0])
        sock.setblocking(False)
        return sock

    def drop(self, prefix: str) -> None:
        if self._conn is not None or os.path.exists(self.path):
            self._ask({"op": "drop", "prefix": prefix})

    def close(self) -> None:
        """Disconnect: the holder keeps what it holds for the next daemon (and exits if
        that is nothing)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def serve(path: str) -> None:
    """The holder's loop (see the module docstring)."""
    held: dict[str, int] = {}
    holds: dict[str, float] = {}  # name: seconds it is held once its daemon is gone
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old = os.umask(0o077)
    try:
        server.bind(path + ".new")
    finally:
        os.umask(old)
    server.listen(4)
    # In place only once it listens: a daemon that sees PATH can connect at once.
    os.rename(path + ".new", path)
    identity = os.stat(path).st_ino
    left = time.monotonic()  # when the last daemon went (or the holder began)
    while True:
        now = time.monotonic()
        expired = [n for n in holds if n in held and now - left >= holds[n]]
        for name in expired:
            os.close(held.pop(name))
            del holds[name]
        if expired and not held:
            break  # nothing left to keep for a daemon
        wait = min([_LOOK_SECONDS, *(left + holds[n] - now for n in holds if n in held)])
        ready, _, _ = select.select([server], [], [], max(wait, 0.0))
        if not ready:
            if not _still_ours(path, identity) or time.monotonic() - left > HOLD_SECONDS:
                break
            continue
        conn, _ = server.accept()
        with conn:
            _answer(conn, held, holds)
        left = time.monotonic()
        if not held:
            break  # its daemon went away holding nothing: nothing to keep
    for fd in held.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(OSError):
        if _still_ours(path, identity):
            os.unlink(path)


def _still_ours(path: str, identity: int) -> bool:
    try:
        return os.stat(path).st_ino == identity
    except OSError:
        return False


def _answer(conn: socket.socket, held: dict[str, int], holds: dict[str, float]) -> None:
    """Answer one daemon until it goes."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 4)
        except OSError:
            return
        if not data:
            for fd in fds:
                os.close(fd)
            return
        try:
            request = json.loads(data)
        except ValueError:
            request = {}
        op = request.get("op")
        reply: list[int] = []
        if op == "put" and fds:
            name = str(request.get("name", ""))
            if (previous := held.pop(name, None)) is not None:
                os.close(previous)
            held[name] = fds.pop(0)
            holds.pop(name, None)
            with contextlib.suppress(TypeError, ValueError):
                if (hold := request.get("hold")) is not None:
                    holds[name] = max(0.0, float(hold))
        elif op == "take":
            found = held.get(str(request.get("name", "")))
            reply = [found] if found is not None else []
        elif op == "drop":
            prefix = str(request.get("prefix", ""))
            for name in [n for n in held if n.startswith(prefix)]:
                os.close(held.pop(name))
                holds.pop(name, None)
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            socket.send_fds(conn, [b"{}"], reply)


if __name__ == "__main__":
    serve(sys.argv[1])
