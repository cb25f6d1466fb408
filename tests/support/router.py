"""The shipped entry point (deploy/router/nginx.conf) run for real: Debian's nginx, as
`make nginx` unpacks it, with the routes a test gives and its port on loopback."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
NGINX_ROOT = Path(
    os.environ.get("AGENTD_NGINX_ROOT", os.path.expanduser("~/.cache/agentd/nginx/root"))
)
NGINX = NGINX_ROOT / "usr/sbin/nginx"
MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


def available() -> bool:
    return NGINX.is_file()


@contextmanager
def router(prefix: Path, routes: dict[str, str]) -> Iterator[str]:
    """nginx routing each name of `routes` to its HOST:PORT; yields its address."""
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = (ROOT / "deploy/router/nginx.conf").read_text()
    conf = conf.replace(MODULE, str(NGINX_ROOT) + MODULE)  # unpacked, not installed
    conf, n = re.subn(r"listen 7443;", f"listen 127.0.0.1:{port};", conf)
    assert n == 1, "the shipped config's listen line moved"
    (prefix / "nginx.conf").write_text(conf)
    (prefix / "routes.map").write_text("".join(f"{k} {v};\n" for k, v in routes.items()))
    argv = [str(NGINX), "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"]
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen([*argv, "-g", "daemon off;"], stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _listening(port) or proc.poll() is not None, 30, "nginx listening")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(prefix, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
