"""Refuse to attack unless inside the sandbox; then exec the attack.

Usage: python3 guard.py HOST_PIDNS_INODE -- PROGRAM [ARGS...]

Every attack in this suite goes through here. It proves it runs inside the sandbox
(not uid 0, a pid namespace other than the host's, the sandbox hostname, /proc/1 not
the host's init) and exits 99 "NOT SANDBOXED" without attacking otherwise, so a broken
sandbox fails the test instead of running the attack on the host.
"""

import os
import socket
import sys

NOT_SANDBOXED = 99
SANDBOX_HOSTNAME = "agentd-sandbox"


def inside(host_pidns: str) -> str | None:
    """None when inside the sandbox, else why not."""
    if os.getuid() == 0 or os.geteuid() == 0:
        return "running as uid 0"
    if str(os.stat("/proc/self/ns/pid").st_ino) == host_pidns:
        return "in the host's pid namespace"
    if socket.gethostname() != SANDBOX_HOSTNAME:
        return f"hostname is {socket.gethostname()!r}"
    with open("/proc/1/cmdline", "rb") as f:
        if not f.read().split(b"\0")[0].endswith(b"bwrap"):
            return "/proc/1 is not the sandbox's init"
    return None


def main() -> None:
    host_pidns, sep, *argv = sys.argv[1:]
    why = inside(host_pidns)
    if why is not None or sep != "--" or not argv:
        print(f"NOT SANDBOXED: {why}", file=sys.stderr, flush=True)
        os._exit(NOT_SANDBOXED)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
