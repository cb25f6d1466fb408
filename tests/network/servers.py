"""Servers the real clients' tests start on the host's loopback: a package index (pip),
a registry (npm), git over http (git http-backend, smart protocol) and over ssh
(Debian's openssh-server on a free port, its own host key and authorized_keys; the
host's sshd and its config are never touched)."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import io
import json
import os
import socketserver
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def static(root: Path) -> Iterator[int]:
    """Files under `root` over http (a PEP 503 index is plain directories)."""
    with serving(functools.partial(_Quiet, directory=str(root))) as port:  # type: ignore[arg-type]
        yield port


def wheel(root: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel of module `name` in a PEP 503 tree under `root`."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VALUE = 'from-{name}-{version}'\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    project = root / "simple" / name
    project.mkdir(parents=True, exist_ok=True)
    path = project / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    (project / "index.html").write_text(f'<a href="{path.name}">{path.name}</a>\n')
    return path


def npm_package(root: Path, host: str, port: int, name: str, version: str) -> None:
    """A registry's packument and tarball for package `name`, as files under `root`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for member, text in {
            "package/package.json": json.dumps({"name": name, "version": version}),
            "package/index.js": f"module.exports = 'from-{name}-{version}';\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    (root / name / "-").mkdir(parents=True, exist_ok=True)
    (root / name / "-" / f"{name}-{version}.tgz").write_bytes(data)
    tarball = f"http://{host}:{port}/{name}/-/{name}-{version}.tgz"
    packument = {
        "name": name,
        "dist-tags": {"latest": version},
        "versions": {
            version: {
                "name": name,
                "version": version,
                "dist": {
                    "tarball": tarball,
                    "shasum": hashlib.sha1(data).hexdigest(),
                    "integrity": integrity,
                },
            }
        },
    }
    (root / name / "index.json").write_text(json.dumps(packument))


class _Registry(_Quiet):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        # /NAME is the packument; anything else a file.
        if self.path.count("/") == 1:
            self.path = self.path.rstrip("/") + "/index.json"
        super().do_GET()


@contextmanager
def registry(root: Path) -> Iterator[int]:
    with serving(functools.partial(_Registry, directory=str(root))) as port:  # type: ignore[arg-type]
        yield port


class _GitHttp(http.server.BaseHTTPRequestHandler):
    """git's smart http protocol: each request handed to git http-backend (CGI)."""

    project_root = ""

    def log_message(self, *args: object) -> None:
        pass

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": self.project_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _cgi
    do_POST = _cgi


@contextmanager
def git_http(project_root: Path) -> Iterator[int]:
    handler = type("GitHttp", (_GitHttp,), {"project_root": str(project_root)})
    with serving(handler) as port:
        yield port


def bare_repo(root: Path, name: str, marker: str) -> Path:
    """A bare repository `name`.git under `root` with one commit holding `marker`."""
    work = root / f"{name}-work"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
    (work / "MARKER").write_text(marker + "\n")
    subprocess.run(["git", "-C", str(work), "add", "MARKER"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "one"], check=True, env=env)
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, env=env)
    return bare


@contextmanager
def sshd(base: Path, client_public_key: str) -> Iterator[int]:
    """openssh-server on 127.0.0.1 (a free port), its own host key and authorized_keys;
    root may log in with the test's key only."""
    base.mkdir(parents=True, exist_ok=True)
    host_key = base / "host_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    keys = base / "authorized_keys"
    keys.write_text(client_public_key)
    keys.chmod(0o600)
    port = free_port()
    config = base / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {keys}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        f"StrictModes no\nPidFile {base / 'sshd.pid'}\n"
    )
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr is not None
        for raw in proc.stderr:  # it says when it listens
            if b"Server listening" in raw:
                break
        else:
            raise RuntimeError("sshd did not start")
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
