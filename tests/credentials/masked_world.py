"""A daemon with masked credentials (`credential_env_vars`, `credential_files`) and the
TLS upstreams they go to, on the host's loopback with a CA of the test's own:

- `api.test`: echoes what it was sent (method, path, Authorization, body) as JSON, and
  answers /user only to the real GitHub token, /redirect?to=URL with a 302;
- `anthropic.test`: a Messages API answering only the real API key;
- `other.test`: the same echo, where no entry injects (tunnelled untouched);
- `git.test`: git's smart http, requiring Basic agentd-bot:<the real token>;
- `bad.test`: a host an entry injects to whose certificate names another host.

Python's clients (requests, httpx, the anthropic SDK) are copied from the test's venv
to a directory the sandbox can read (`PYTHONPATH` in the commands that use them).
"""

from __future__ import annotations

import base64
import glob
import gzip
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.credentials import upstreams
from tests.network import servers
from tests.sandbox.conftest import sandbox_dir
from tests.support.daemon import DaemonProcess, start_daemon

API, ANTHROPIC, OTHER, GIT, BAD = "api.test", "anthropic.test", "other.test", "git.test", "bad.test"
NPM = "npm.test"
NPMRC_PATH = "/run/agentd-test/npmrc"
# A GitHub Enterprise host for gh, which takes no port: 443 on a loopback address of its own.
GHE = "ghe.test"
GIT_CRED_PATH = "/run/agentd-test/git-credentials"
# Packages the sandbox's python imports, copied from this venv.
CLIENT_PACKAGES = (
    "requests",
    "urllib3",
    "charset_normalizer",
    "idna",
    "certifi",
    "httpx",
    "httpcore",
    "httpx2",
    "truststore",
    "opentelemetry",
    "httpcore2",
    "h11",
    "anyio",
    "sniffio",
    "anthropic",
    "pydantic",
    "pydantic_core",
    "typing_extensions.py",
    "typing_inspection",
    "annotated_types",
    "distro",
    "jiter",
    "docstring_parser",
)


@dataclass
class Seen:
    """Every request an upstream got: (host header, method, path, headers, body)."""

    requests: list[tuple[str, str, str, dict[str, str], bytes]] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(f"{h} {m} {p} {hd} {b!r}" for h, m, p, hd, b in self.requests)


class _Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Its head and body are two writes: without this, a client's delayed ACK adds 40 ms.
    disable_nagle_algorithm = True
    seen: Seen
    gh_token = ""
    anthropic_key = ""

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        host = self.headers.get("Host", "")
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.seen.requests.append((host, self.command, self.path, headers, body))
        auth = self.headers.get("Authorization", "")
        path, _, query = self.path.partition("?")
        if path == "/v1/messages":
            # The SDK sends the key as x-api-key or, as of late, as a bearer token.
            sent = (self.headers.get("x-api-key"), auth.removeprefix("Bearer "))
            if self.anthropic_key not in sent:
                self._send(401, b'{"type":"error","error":{"type":"authentication_error"}}')
                return
            answer = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [{"type": "text", "text": "hello from the fake Messages API"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
            self._send(200, json.dumps(answer).encode())
            return
        if path in ("/user", "/api/v3/user"):  # GitHub's, and GitHub Enterprise's for gh
            if auth not in (f"Bearer {self.gh_token}", f"token {self.gh_token}"):
                self._send(401, b'{"message":"Bad credentials"}')
                return
            self._send(200, b'{"login":"octo"}')
            return
        if path == "/big":  # ?MiB: a download, for the bench
            size = int(query or "1") << 20
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = os.urandom(1 << 16)
            for _ in range(size >> 16):
                self.wfile.write(chunk)
            return
        if path == "/redirect":
            self._send(302, b"{}", (("Location", query.removeprefix("to=")),))
            return
        if path == "/echo-gzip":  # what was sent, gzipped whatever was asked for
            echoed_gzip = gzip.compress(json.dumps({"auth": auth, "path": self.path}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(echoed_gzip)))
            self.end_headers()
            self.wfile.write(echoed_gzip)
            return
        echoed = {
            "host": host,
            "path": self.path,
            "auth": auth,
            "auth_b64": base64.b64encode(auth.encode()).decode(),
            "body": body.decode("latin-1"),
        }
        self._send(200, json.dumps(echoed).encode())

    do_GET = do_POST = do_PUT = _handle


@contextmanager
def _on_443(handler: type[http.server.BaseHTTPRequestHandler], tls: upstreams.Tls) -> Iterator[str]:
    """`handler` over TLS on port 443 of a random loopback address; that address, or ""
    when none could be had (not root, or all taken)."""
    for _ in range(20):
        address = "127.{}.{}.{}".format(*os.urandom(3))
        if address.endswith((".0", ".255")):
            continue
        try:
            server = servers._Server((address, 443), handler)
        except OSError:
            continue
        break
    else:
        yield ""
        return
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield address
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class World:
    daemon: DaemonProcess
    gh_token: str
    anthropic_key: str
    api_port: int
    bad_port: int
    git_port: int
    seen: Seen
    git_seen: upstreams.Seen
    pythonpath: str
    token_file: Path
    test_ca: str  # the upstreams' CA, where the sandbox can read it
    ghe: str  # the address ghe.test listens on (port 443), or "": none could be had

    def url(self, host: str, path: str) -> str:
        port = self.bad_port if host == BAD else self.git_port if host == GIT else self.api_port
        return f"https://{host}:{port}{path}"


def copy_clients(dest: str) -> str:
    """The venv's client packages where the sandbox's /usr/bin/python3 can import them."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    out = os.path.join(dest, "site")
    os.makedirs(out)
    for name in CLIENT_PACKAGES:
        source = os.path.join(site, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(out, name), ignore=shutil.ignore_patterns("*.pyc"))
        elif os.path.exists(source):
            shutil.copy(source, out)
        # Their metadata too (some read their own version at import).
        for info in glob.glob(os.path.join(site, name.removesuffix(".py") + "-*.dist-info")):
            shutil.copytree(info, os.path.join(out, os.path.basename(info)))
    subprocess.run(["chmod", "-R", "a+rX", dest], check=True)
    return out


def config(base: Path, tls: upstreams.Tls, token_file: Path, template: Path, ghe: str) -> str:
    """`template` is the git credential file; beside it, `npmrc`."""
    names = (API, ANTHROPIC, OTHER, GIT, BAD, NPM)
    resolve = ", ".join(f'"{n}" = ["127.0.0.1"]' for n in names)
    resolve += f', "{GHE}" = ["{ghe or "127.0.0.1"}"]'
    listed = ", ".join(f'"{n}"' for n in (*names, GHE))
    return f"""
network_allowed_domains = [{listed}]
network_allow_private_hosts = [{listed}]
network_resolve = {{ {resolve} }}
network_upstream_ca_file = "{tls.ca}"

[[credential_sources]]
name = "gh"
command = ["cat", "{token_file}"]
cache_seconds = 60

[[credential_env_vars]]
name = "GITHUB_TOKEN"
mode = "mask"
injectHosts = ["{API}", "{GIT}", "{BAD}", "{GHE}"]
source = "gh"

[[credential_env_vars]]
name = "ANTHROPIC_API_KEY"
mode = "mask"
injectHosts = ["{ANTHROPIC}"]

[[credential_env_vars]]
name = "AGENTD_TEST_DENIED"
mode = "deny"

[[credential_files]]
path = "{GIT_CRED_PATH}"
mode = "mask"
injectHosts = ["{GIT}"]
source = "gh"
from = "{template}"

[[credential_files]]
path = "{NPMRC_PATH}"
mode = "mask"
injectHosts = ["{NPM}"]
source = "gh"
from = "{template.parent / "npmrc"}"
"""


@contextmanager
def masked_world(base: Path) -> Iterator[World]:
    tls = upstreams.make_tls(base / "tls", [API, ANTHROPIC, OTHER, GIT, GHE, NPM])
    gh_token = "ghp_" + os.urandom(18).hex()[:36]
    anthropic_key = "sk-ant-api03-" + base64.urlsafe_b64encode(os.urandom(60)).decode()[:80]
    token_file = base / "gh-token"
    token_file.write_text(gh_token + "\n")
    token_file.chmod(0o600)
    repos = base / "repos"
    repos.mkdir()
    bare = servers.bare_repo(repos, "demo", "MARKER-MASKED")
    git_config = ["git", "--git-dir", str(bare), "config", "http.receivepack", "true"]
    subprocess.run(git_config, check=True)
    seen = Seen()
    handler = type(
        "Api", (_Api,), {"seen": seen, "gh_token": gh_token, "anthropic_key": anthropic_key}
    )
    basic = base64.b64encode(f"agentd-bot:{gh_token}".encode()).decode()
    shared = Path(sandbox_dir("agentd-masked-"))
    with ExitStack() as stack:
        api_port = stack.enter_context(upstreams._tls_serving(handler, tls))
        # A certificate that names the other hosts, never bad.test: invalid there.
        bad_port = stack.enter_context(upstreams._tls_serving(handler, tls))
        ghe = stack.enter_context(_on_443(handler, tls))
        git_port, git_seen = stack.enter_context(
            upstreams.git_https(repos, tls, f"Basic {basic}", "http://evil.test:9")
        )
        registry = base / "registry"
        registry.mkdir()
        npm_port, npm_seen = stack.enter_context(
            upstreams.registry_https(registry, tls, f"Bearer {gh_token}")
        )
        servers.npm_package(registry, NPM, npm_port, "agentd-masked-npm", "1.0.0")
        packument = registry / "agentd-masked-npm" / "index.json"
        packument.write_text(packument.read_text().replace("http://", "https://"))
        (base / "npmrc").write_text(
            f"registry=https://{NPM}:{npm_port}/\n//{NPM}:{npm_port}/:_authToken={gh_token}\n"
        )
        template = base / "git-credentials"
        template.write_text(f"https://agentd-bot:{gh_token}@{GIT}:{git_port}\n")
        template.chmod(0o600)
        (base / "config.toml").write_text(config(base, tls, token_file, template, ghe))
        pythonpath = copy_clients(str(shared))
        shutil.copy(tls.ca, shared / "test-ca.pem")
        (shared / "test-ca.pem").chmod(0o644)
        proc = start_daemon(
            base / "d",
            ["--config", str(base / "config.toml")],
            env={"ANTHROPIC_API_KEY": anthropic_key, "AGENTD_TEST_DENIED": "denied-value"},
        )
        try:
            yield World(
                proc,
                gh_token,
                anthropic_key,
                api_port,
                bad_port,
                git_port,
                seen,
                git_seen,
                pythonpath,
                token_file,
                str(shared / "test-ca.pem"),
                ghe,
            )
        finally:
            code = proc.stop()
            shutil.rmtree(shared, ignore_errors=True)
        assert code == 0, proc.log
        assert "Traceback" not in proc.log, proc.log
