"""`agentd serve --detach`: the daemon in the background for a person's session, on a
machine without systemd (or without a user unit): a child in its own session, its log
in the state dir, this command returning once it serves. `agentd stop` stops it (it
finds the daemon by its socket)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agentd.cli import health
from agentd.foundation.config import Config

# How long the daemon may take to serve (a first start builds its seccomp filters).
START_SECONDS = 120.0
LOG_NAME = "agentd.log"


def log_path(config: Config) -> str:
    return os.path.join(config.state_dir, LOG_NAME)


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def start(config: Config, argv: list[str]) -> int:
    """Start `agentd serve` (these arguments, without --detach) in the background and
    wait until it serves: 0 and what to do next, or 2 and the end of its log."""
    if os.path.exists(config.socket_path) and health.check(config.socket_path, 5.0)[0]:
        print(
            f"agentd: a daemon already serves on unix:{config.socket_path}; `agentd stop` stops it",
            file=sys.stderr,
        )
        return 1
    os.makedirs(config.state_dir, mode=0o700, exist_ok=True)
    path = log_path(config)
    args = [a for a in argv if a != "--detach"]
    with open(path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "agentd", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            child.wait(timeout=0.2)  # ended: it could not start
            break
        except subprocess.TimeoutExpired:
            pass
        if os.path.exists(config.socket_path):
            serving, _ = health.check(config.socket_path, 5.0)
            if serving:
                print(
                    f"agentd: running in the background (pid {child.pid}) on "
                    f"unix:{config.socket_path}, logging to {path}; `agentd stop` stops it\n"
                    "agentd: next: `agentctl status`, then "
                    "`agentctl session new --workspace DIR --name NAME`"
                )
                return 0
    else:
        child.terminate()
    print(
        f"agentd: the daemon did not start; the end of {path}:\n{_tail(path)}",
        file=sys.stderr,
        end="",
    )
    return 2
