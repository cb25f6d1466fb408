"""Debian's OpenSSH on loopback for benches that compare with `ssh -L` (root only): a
throwaway sshd with its own host and user keys, and the ssh argv that reaches it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    port: int
    key: Path
    proc: subprocess.Popen[str]

    def ssh(self, *options: str, command: tuple[str, ...] = ()) -> list[str]:
        return [
            "ssh", "-p", str(self.port), "-i", str(self.key), "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", *options, "root@127.0.0.1", *command,
        ]  # fmt: skip


@contextmanager
def sshd() -> Iterator[Sshd]:
    if os.geteuid() != 0 or not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
        raise SystemExit("needs root, sshd and ssh (apt-get install openssh-server)")
    base = Path(tempfile.mkdtemp(prefix="agentd-bench-sshd-"))
    for name in ("host", "user"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True
        )
    (base / "authorized_keys").write_text((base / "user.pub").read_text())
    port = free_port()
    (base / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"PidFile {base / 'sshd.pid'}\nStrictModes no\nAllowTcpForwarding yes\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # its privilege separation dir
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(base / "sshd_config")], stderr=subprocess.DEVNULL, text=True
    )
    server = Sshd(port, base / "user", proc)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(server.ssh("-T", command=("true",)), capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise SystemExit("sshd did not start")
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def ssh_forward(server: Sshd, target_port: int) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """`ssh -N -L LOCAL:127.0.0.1:target_port`: its local port once it listens."""
    local = free_port()
    proc = subprocess.Popen(server.ssh("-N", "-L", f"{local}:127.0.0.1:{target_port}"), text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", local), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield local, proc
    finally:
        proc.terminate()
        proc.wait(10)
