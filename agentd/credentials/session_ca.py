"""A session's own certificate authority, for the hosts its masked credentials go to.

Made in the daemon's memory when a session first needs it; its key is never written
anywhere (not even to the daemon's state), so no sandbox, no other session and no
later daemon can sign with it. Its certificate is trusted only inside that session's
sandbox (the bundle and variables `environment` and `files` give it), so a leaf it
signs means nothing to any other session or to the host. Leaves are made per host,
short-lived, and kept while the session lives.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Where a session's sandbox finds the CA and the system's bundle with it.
CA_MOUNT = "/run/agentd-net/ca.pem"
BUNDLE_MOUNT = "/run/agentd-net/ca-bundle.pem"
# The system's bundle, also shown with the session's CA added (tools with a fixed path).
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
LEAF_DAYS = 7
CA_DAYS = 30
LEAVES_KEPT = 256


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


class SessionCA:
    def __init__(self, session_id: str) -> None:
        now = datetime.datetime.now(datetime.UTC)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = _name(f"agentd session {session_id[:32]}")
        public = self._key.public_key()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM)
        self._leaves: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context with a leaf for `host` signed by this CA (HTTP/1.1 only)."""
        with self._lock:
            ctx = self._leaves.get(host)
            if ctx is None:
                ctx = self._leaves[host] = self._leaf(host)
                while len(self._leaves) > LEAVES_KEPT:
                    self._leaves.pop(next(iter(self._leaves)))
            return ctx

    def _leaf(self, host: str) -> ssl.SSLContext:
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        try:
            alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alt = x509.DNSName(host)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(host[:64]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName([alt]), False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .sign(self._key, hashes.SHA256())
        )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.pem
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # load_cert_chain reads files only: memory files of the daemon's, closed at once
        # (the leaf's key is never on a disk either).
        fds = [os.memfd_create("agentd-leaf", os.MFD_CLOEXEC) for _ in range(2)]
        try:
            os.write(fds[0], chain)
            os.write(fds[1], key_pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
        finally:
            for fd in fds:
                os.close(fd)
        return ctx


def system_bundle() -> bytes:
    try:
        with open(SYSTEM_BUNDLE, "rb") as f:
            return f.read()
    except OSError:
        return b""


def sandbox_environment() -> dict[str, str]:
    """The usual clients told to trust the bundle with the session's CA in it."""
    return {
        "SSL_CERT_FILE": BUNDLE_MOUNT,
        "REQUESTS_CA_BUNDLE": BUNDLE_MOUNT,
        "CURL_CA_BUNDLE": BUNDLE_MOUNT,
        "GIT_SSL_CAINFO": BUNDLE_MOUNT,
        "NODE_EXTRA_CA_CERTS": CA_MOUNT,
        "npm_config_cafile": BUNDLE_MOUNT,
        "PIP_CERT": BUNDLE_MOUNT,
        "AWS_CA_BUNDLE": BUNDLE_MOUNT,
    }
