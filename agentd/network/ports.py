"""A session's ports: what listens inside its sandbox network namespace, and a connection
to its loopback made from inside, for `agentctl forward` and `agentctl ports`.

Only a proxied session keeps a namespace of its own (netns.py, kept at
<state>/netns/<session id>), and only its loopback is reached: the address is one of
127.0.0.1 and ::1, never one a client names, and the namespace is the one the session's
id leads to, never one a path from a client does. A session with the host's network
("on") or none ("off", a fresh namespace per call that ends with it) is refused with a
line saying why.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from agentd.foundation.errors import FailedPrecondition, InvalidRequest
from agentd.network import netns
from agentd.network.service import NetworkService
from agentd.sessions.session import Session, network_mode

# The sandbox's own loopback: the only addresses a forward reaches.
LOOPBACK = ("127.0.0.1", "::1")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
# A connect inside the namespace goes to its loopback: it answers at once or never will.
CONNECT_TIMEOUT_S = 5.0


class NotForwardable(FailedPrecondition):
    """The port cannot be reached: nothing listens, or the session keeps no network."""


@dataclass(frozen=True, slots=True)
class Listener:
    address: str
    port: int
    inode: int

    @property
    def forwardable(self) -> bool:
        return self.address in ("127.0.0.1", "0.0.0.0", "::1", "::") or self.address.startswith(
            "127."
        )


def checked_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise InvalidRequest(f"port must be 1-65535, got {port}")
    return port


def checked_host(host: str) -> str:
    """ "" (either loopback), 127.0.0.1 or ::1; anything else names another machine."""
    if host in ("", *LOOPBACK):
        return host
    raise InvalidRequest(
        f"a forward reaches only the sandbox's own loopback (127.0.0.1 or ::1), not {host!r}"
    )


def namespace(service: NetworkService | None, session: Session) -> str:
    """Where the session's namespace is kept, or NotForwardable saying why it keeps none
    (it may not be made yet: `exists`)."""
    mode = network_mode(session)
    if mode == "on":
        raise NotForwardable(
            f'session {session.label} uses the dev box\'s own network (network "on"): what it '
            "starts listens on the dev box's loopback; reach it with `ssh -L "
            "PORT:127.0.0.1:PORT` to the dev box instead"
        )
    if mode == "off":
        raise NotForwardable(
            f'session {session.label} has no network (network "off"): each call gets a fresh '
            "namespace that ends with it, so nothing it starts can be reached; use a session "
            "with the default (proxied) network"
        )
    if service is None or not service.available():
        why = service.unavailable if service is not None else "its network is not running"
        raise NotForwardable(f"this daemon keeps no network namespaces ({why})")
    return os.path.join(service.dir, session.id)


def proxy_ports(service: NetworkService | None) -> frozenset[int]:
    """The ports agentd's own listeners use in every session's namespace (the proxy, and
    the credential routes' when routes are configured): not the session's servers, never
    listed nor forwarded (the laptop would borrow the session's egress or its secrets)."""
    if service is None:
        return frozenset()
    config = service.config
    own = {config.network_http_port, config.network_socks_port}
    if config.credential_routes:
        own.add(config.credential_route_port)
    return frozenset(own)


def exists(path: str) -> bool:
    """Whether the session's namespace was made (a command ran in the session)."""
    return os.path.exists(path)


def _hex_address(text: str) -> str:
    raw = bytes.fromhex(text)
    # The kernel prints each 32-bit word of the address in host (little-endian) order.
    fixed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(fixed) == 4 else socket.AF_INET6
    shown = socket.inet_ntop(family, fixed)
    return shown.removeprefix("::ffff:") if family == socket.AF_INET6 and "." in shown else shown


def parse_proc_net(text: str) -> list[Listener]:
    """The listening sockets in a /proc/net/tcp or tcp6 table."""
    out: list[Listener] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, _, port = fields[1].partition(":")
        try:
            out.append(Listener(_hex_address(address), int(port, 16), int(fields[9])))
        except ValueError:
            continue
    return out


def _read_tables() -> list[Listener]:
    found: list[Listener] = []
    for name in ("tcp", "tcp6"):
        try:
            # thread-self: this thread's namespace (it joined the session's), not the
            # daemon's, which /proc/self/net would show.
            with open(f"/proc/thread-self/net/{name}") as f:
                found += parse_proc_net(f.read())
        except FileNotFoundError:  # no IPv6 in this kernel
            continue
    return sorted(set(found), key=lambda x: (x.port, x.address))


def listeners(path: str) -> list[Listener]:
    """What listens (TCP) inside the namespace kept at `path`."""

    def read() -> list[Listener]:
        netns.join(path)
        return _read_tables()

    return netns.in_thread(read)


def processes(inodes: set[int]) -> dict[int, list[str]]:
    """Socket inode -> the processes holding it ("pid command"), as far as /proc shows;
    a process that ends meanwhile is skipped. Only names and numbers are read."""
    found: dict[int, list[str]] = {}
    if not inodes:
        return found
    wanted = {f"socket:[{i}]": i for i in inodes}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            # A descriptor closed meanwhile is skipped alone: the process's other
            # descriptors (its listener among them) are still read.
            try:
                inode = wanted.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if inode is None:
                    continue
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            found.setdefault(inode, []).append(f"{pid} {comm}")
    return found


def listening_on(path: str, port: int, host: str) -> str:
    """The loopback address `port` listens on in the namespace (127.0.0.1 first), or
    NotForwardable saying what to do."""
    found = listeners(path)
    for address in [host] if host else list(LOOPBACK):
        for entry in found:
            if entry.port != port:
                continue
            wildcard = "0.0.0.0" if address == "127.0.0.1" else "::"
            if entry.address in (address, wildcard) or (
                address == "127.0.0.1" and entry.address.startswith("127.")
            ):
                return address
    raise NotForwardable(nothing_listens(port))


def nothing_listens(port: int) -> str:
    return (
        f"nothing listens on port {port} in the session's sandbox; start the server there "
        "(e.g. as a background task), and see what listens with `agentctl ports SESSION`"
    )


def connect(path: str, port: int, host: str) -> socket.socket:
    """A connection from inside the namespace to its loopback's `port`, non-blocking;
    NotForwardable when nothing listens there."""
    addresses = [host] if host else list(LOOPBACK)

    def dial() -> socket.socket:
        netns.join(path)
        last: OSError | None = None
        for address in addresses:
            try:
                sock = socket.create_connection((address, port), CONNECT_TIMEOUT_S)
            except OSError as exc:
                last = exc
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        assert last is not None
        raise last

    try:
        return netns.in_thread(dial)
    except ConnectionRefusedError:
        raise NotForwardable(nothing_listens(port)) from None
    except OSError as exc:
        raise NotForwardable(
            f"could not connect to port {port} in the session's sandbox: "
            f"{exc.strerror or exc}; is the server still running?"
        ) from None
