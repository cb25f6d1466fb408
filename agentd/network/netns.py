"""A session's network namespace: made once, kept by a bind mount, joined by every call.

Root only. The namespace is made in a thread of its own (a namespace is a per-thread
attribute; the thread ends right after), its loopback brought up, and kept alive by
bind-mounting the thread's /proc/thread-self/ns/net on a file in the daemon's state
(hidden from every sandbox), so it outlives the daemon for the tasks still in it: the
next daemon joins the same one. Calls join it with nsenter before bwrap, which then does
not unshare the network. The daemon's listeners are bound inside the same way: a thread
joins the namespace, binds, and ends; the socket stays in the namespace it was made in
and is served on the daemon's loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import TypeVar

from agentd_sandbox import linux
from agentd_sandbox.linux import CLONE_NEWNET, MNT_DETACH, MS_BIND

T = TypeVar("T")

SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFF_LOOPBACK = 0x8
IFF_RUNNING = 0x40


def _in_thread(work: Callable[[], T]) -> T:
    """`work()` in a fresh thread that ends after it: whatever namespace it joins or
    makes goes with the thread, never with a thread of the daemon's pool."""
    box: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=run, name="agentd-netns", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return box[0]


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags))


def _join(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        linux.setns(fd, CLONE_NEWNET)
    finally:
        os.close(fd)


def unsupported() -> str | None:
    """Why this daemon cannot keep namespaces (not root, or no CAP_SYS_ADMIN, as under
    the shipped systemd unit), or None if it can: a thread tries to make one."""
    if os.geteuid() != 0:
        return "the daemon is not root"
    try:
        _in_thread(lambda: linux.unshare(CLONE_NEWNET))
    except OSError as exc:
        return f"it cannot make a network namespace ({exc.strerror or exc}; CAP_SYS_ADMIN?)"
    return None


def usable(path: str) -> bool:
    """Whether `path` is a kept namespace (a thread can join it)."""
    try:
        _in_thread(lambda: _join(path))
    except OSError:
        return False
    return True


def create(path: str) -> None:
    """A new namespace with its loopback up, kept at `path` (made, 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)

    def make() -> None:
        linux.unshare(CLONE_NEWNET)
        _loopback_up()
        source = b"/proc/thread-self/ns/net"
        linux.mount(source, path, None, MS_BIND)

    try:
        _in_thread(make)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def ensure(path: str) -> None:
    """The namespace kept at `path`, made if there is none (or what is there is not one)."""
    if os.path.exists(path):
        if usable(path):
            return
        remove(path)
    create(path)


def remove(path: str) -> None:
    """The namespace's mount detached and its file gone; processes still in it keep it."""
    with contextlib.suppress(OSError):  # not mounted (a namespace never made, or gone)
        linux.umount2(path, MNT_DETACH)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def listen(path: str, addresses: list[tuple[str, int]]) -> list[socket.socket]:
    """Listening TCP sockets bound inside the namespace at `path`, non-blocking."""

    def bind() -> list[socket.socket]:
        _join(path)
        out: list[socket.socket] = []
        try:
            for host, port in addresses:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                out.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
                s.listen(1024)
                s.setblocking(False)
        except BaseException:
            for s in out:
                s.close()
            raise
        return out

    return _in_thread(bind)


def connect(path: str, address: tuple[str, int], timeout: float = 5.0) -> socket.socket:
    """A TCP connection made from inside the namespace (tests and `agentctl` checks)."""

    def dial() -> socket.socket:
        _join(path)
        return socket.create_connection(address, timeout)

    return _in_thread(dial)


# For ports.py: its reads and connects run in a joining thread too.
join = _join
in_thread = _in_thread
