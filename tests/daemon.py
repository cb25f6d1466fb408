"""Start the real daemon as a process on a temp socket and state dir, for tests and benches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class DaemonProcess:
    socket: str
    state_dir: str
    proc: subprocess.Popen[bytes]
    log_lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(self.log_lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start_daemon(
    base: Path,
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 20,
) -> DaemonProcess:
    base.mkdir(parents=True, exist_ok=True)
    socket = str(base / "run" / "agentd.sock")
    state_dir = str(base / "state")
    proc_env = {**os.environ, **(env or {})}
    proc_env.pop("AGENTD_SOCKET", None)
    proc_env.pop("AGENTD_STATE_DIR", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentd",
            "serve",
            "--socket",
            socket,
            "--state-dir",
            state_dir,
            *(extra_args or []),
        ],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=proc_env,
    )
    daemon = DaemonProcess(socket, state_dir, proc)
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            daemon.log_lines.append(line)
            if "agentd serving" in line:
                ready.set()
        ready.set()  # the daemon exited; stop waiting

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(timeout) or proc.poll() is not None:
        daemon.stop(signal.SIGKILL)
        raise RuntimeError(f"agentd did not start:\n{daemon.log}")
    return daemon
