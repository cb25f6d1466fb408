"""TLS for the TCP listener: `agentd tls init`, and checking a cert and key before serving.

`tls init` makes what a laptop needs to reach this daemon safely: a CA of its own
(its private key is not kept: nothing can sign another certificate later), a server
certificate signed by it naming this host, and a random bearer token. The daemon
gets the server pair and the token file; the laptop gets the CA certificate and the
token file.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agentd.foundation.errors import InvalidRequest

CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"
TOKEN_FILE = "token"
DEFAULT_LISTEN = "0.0.0.0:7777"


@dataclass(frozen=True)
class TlsFiles:
    directory: Path
    names: list[str]
    listen: str

    @property
    def ca(self) -> Path:
        return self.directory / CA_FILE

    @property
    def cert(self) -> Path:
        return self.directory / CERT_FILE

    @property
    def key(self) -> Path:
        return self.directory / KEY_FILE

    @property
    def token(self) -> Path:
        return self.directory / TOKEN_FILE


def host_names(extra: list[str]) -> list[str]:
    """The names the server certificate should hold: this host's, loopback, and `extra`."""
    names: list[str] = []
    for name in [*extra, socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "::1"]:
        if name and name not in names:
            names.append(name)
    return names


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes) -> None:
    """Created 0600 and new: a secret is never readable by others, even briefly, and never
    written into a file (or through a symlink) someone else made there."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def init(directory: str, names: list[str], listen: str, days: int, force: bool) -> TlsFiles:
    """Write ca.pem, server.pem, server-key.pem and token into `directory`."""
    files = TlsFiles(Path(directory).absolute(), host_names(names), listen)
    existing = [p for p in (files.ca, files.cert, files.key, files.token) if p.exists()]
    if existing and not force:
        raise InvalidRequest(
            f"{existing[0]} already exists; pass --force to replace the files in {directory}"
        )
    files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = files.directory.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise InvalidRequest(
            f"{files.directory} is writable by other users or not yours; the key and token "
            "need a private directory (--dir)"
        )
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    host = socket.gethostname()

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"agentd CA on {host}")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, files.names[0])]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(files.names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(files.key, _pem_key(server_key))
    _write_private(files.token, (secrets.token_urlsafe(32) + "\n").encode())
    return files


def instructions(files: TlsFiles, config_file: str) -> str:
    """What to put in the daemon's config (`config_file`, where `agentd serve` reads it
    from here), and the command to run on the laptop."""
    port = files.listen.rpartition(":")[2]
    host = files.names[0]
    return f"""\
Wrote in {files.directory}:
  {CA_FILE}          the CA certificate: clients check the daemon with it (its key was not kept)
  {CERT_FILE}      the daemon's certificate, for: {", ".join(files.names)}
  {KEY_FILE}  the daemon's private key (0600)
  {TOKEN_FILE}            the bearer token clients send (0600)

Add to the daemon's config ({config_file}) and restart it:

tcp_listen = "{files.listen}"
tls_cert = "{files.cert}"
tls_key = "{files.key}"
token_file = "{files.token}"

On the laptop, after copying {CA_FILE} and {TOKEN_FILE} there (e.g. into ~/.config/agentd/{host}/):

agentctl context add {host} --address {host}:{port} --ca ~/.config/agentd/{host}/{CA_FILE} \\
    --token-file ~/.config/agentd/{host}/{TOKEN_FILE}
agentctl context use {host}
agentctl status
"""


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InvalidRequest(
            f"{what} {path} does not exist; create one with `agentd tls init`"
        ) from None
    except OSError as exc:
        raise InvalidRequest(f"cannot read {what} {path}: {exc.strerror}") from None


def _read_private(path: str, what: str) -> bytes:
    """A secret's bytes, refused if anyone but its owner may read or change it (as ssh
    refuses such a key): a token others can read lets them call the daemon."""
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if mode & 0o077:
                raise InvalidRequest(
                    f"{what} {path} is open to other users (mode {stat.S_IMODE(mode):04o}); "
                    f"agentd refuses it, as ssh refuses such a key: chmod 600 {path}"
                )
            return f.read()
    except FileNotFoundError:
        raise InvalidRequest(
            f"{what} {path} does not exist; create one with `agentd tls init`"
        ) from None
    except OSError as exc:
        raise InvalidRequest(f"cannot read {what} {path}: {exc.strerror}") from None


def load_server_pair(cert_path: str, key_path: str) -> tuple[bytes, bytes]:
    """The (key, cert) PEM pair, checked: gRPC itself only fails later, and obscurely."""
    cert_pem = _read(cert_path, "tls_cert")
    key_pem = _read(key_path, "tls_key")
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise InvalidRequest(f"tls_cert {cert_path} is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise InvalidRequest(f"tls_key {key_path} is not an unencrypted PEM private key") from None
    same = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*same) != cert.public_key().public_bytes(*same):
        raise InvalidRequest(f"tls_key {key_path} is not the key of tls_cert {cert_path}")
    if cert.not_valid_after_utc < datetime.datetime.now(datetime.UTC):
        raise InvalidRequest(
            f"tls_cert {cert_path} expired on {cert.not_valid_after_utc:%Y-%m-%d}; "
            "make a new one with `agentd tls init --force`"
        )
    return key_pem, cert_pem


def load_token(token: str, token_file: str) -> str:
    """The TCP listener's bearer token, from `token_file` or the config's `token`."""
    if token and token_file:
        raise InvalidRequest("set token or token_file, not both")
    if token_file:
        text = _read_private(token_file, "token_file").decode(errors="replace").strip()
        if not text:
            raise InvalidRequest(f"token_file {token_file} is empty")
        return text
    return token
