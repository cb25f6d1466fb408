"""`agentd stop [--tasks]`: stop a running daemon; its background tasks run on (the next
daemon takes them over) unless --tasks, which stops them too, daemon running or not."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from typing import Any

import grpc

from agentd.foundation.config import Config
from agentd.foundation.holder import Holder
from agentd.runs.shim import client as shim_client
from agentd.runs.shim import protocol
from agentd_client.v1 import agentd_pb2, agentd_pb2_grpc


def daemon_pid(config: Config) -> int | None:
    """The pid of the daemon answering on the configured socket, or None."""
    if not os.path.exists(config.socket_path):
        return None
    with grpc.insecure_channel(f"unix:{config.socket_path}") as channel:
        try:
            status = agentd_pb2_grpc.AgentdStub(channel).GetStatus(
                agentd_pb2.GetStatusRequest(), timeout=10
            )
        except grpc.RpcError:
            return None
    return status.pid or None


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in (b"Z", b"X"):  # ended; its parent has yet to reap it
            return True
        time.sleep(0.05)
    return False


def stop_tasks(state_dir: str, timeout: float = 10) -> int:
    """Stop every task's shim under `state_dir` (each records its end for the next daemon
    to report); the number stopped."""
    root = os.path.join(state_dir, "shims")
    stopped = 0
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        try:
            dir_fd = os.open(os.path.join(root, name), os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            stopped += _stop_one(dir_fd, timeout)
        finally:
            os.close(dir_fd)
    return stopped


def _stop_one(dir_fd: int, timeout: float) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(f"/proc/self/fd/{dir_fd}/{protocol.SOCKET_NAME}")
        sock.send(json.dumps({"op": "kill"}).encode())
        sock.settimeout(timeout)
        while data := sock.recv(protocol.MAX_MESSAGE):
            with contextlib.suppress(ValueError):
                if json.loads(data).get("ev") == "exit":
                    return 1
        return 1
    except OSError:
        # Not answering (or already ended): make sure nothing of it runs.
        shim_client.kill_stray(dir_fd)
        return 0
    finally:
        sock.close()


def stop(config: Config, tasks: bool, timeout: float = 30) -> dict[str, Any]:
    """Stop the daemon (SIGTERM, then wait for it), and with `tasks` its tasks' shim_client."""
    result: dict[str, Any] = {"daemon": "not running", "tasks_stopped": 0}
    pid = daemon_pid(config)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        result["daemon"] = "stopped" if _wait_gone(pid, timeout) else "still stopping"
        result["pid"] = pid
    if tasks:
        result["tasks_stopped"] = stop_tasks(config.state_dir)
        # Nothing runs on to connect to the proxies: their held sockets go (holder.py).
        held = Holder(config.state_dir, spawn=False)
        held.drop("")
        held.close()
    return result
