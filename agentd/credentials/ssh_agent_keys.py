"""Where the agent's signatures come from and which host keys it trusts: private key
files the daemon reads (never shown to a sandbox), the owner's own ssh-agent reached
over its socket, and known_hosts files.

All of these are the operator's or the owner's files, read by the daemon; nothing here
reads what a sandbox can write.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import re

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_ssh_private_key,
)

from agentd.credentials import ssh_agent_wire as wire

# A known_hosts file larger than this is not read (it is the operator's, but a mistake
# must not hold the daemon).
_KNOWN_HOSTS_MAX = 8 * 1024 * 1024


class KeySourceError(Exception):
    """A key file or the owner's agent cannot be used; the message says which and why."""


class FileKey:
    """A private key file (OpenSSH format, no passphrase) the daemon signs with."""

    def __init__(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read(1024 * 1024)
            key = load_ssh_private_key(data, password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise KeySourceError(f"ssh_agent_key_files: cannot use {path}: {exc}") from None
        if not isinstance(
            key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
        ):
            raise KeySourceError(f"ssh_agent_key_files: {path}: an unsupported key type")
        self.path = path
        self.key = key
        text = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        self.blob = base64.b64decode(text.split()[1])
        self.fingerprint = wire.fingerprint(self.blob)

    def sign(self, data: bytes, flags: int) -> bytes:
        """The SSH signature blob over `data`."""
        key = self.key
        if isinstance(key, ed25519.Ed25519PrivateKey):
            return wire.string(b"ssh-ed25519") + wire.string(key.sign(data))
        if isinstance(key, ec.EllipticCurvePrivateKey):
            kind = wire.key_type(self.blob)
            r, s = decode_dss_signature(key.sign(data, ec.ECDSA(wire.ecdsa_hash(kind))))
            return wire.string(kind) + wire.string(wire.mpint(r) + wire.mpint(s))
        alg = wire.rsa_algorithm(flags)
        raw = key.sign(data, padding.PKCS1v15(), wire.rsa_hash(alg))
        return wire.string(alg) + wire.string(raw)


class Upstream:
    """One connection to the owner's ssh-agent, serving one sandbox connection (so a
    session bind passed on stays with the signatures it binds)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()

    async def call(self, payload: bytes) -> bytes:
        async with self._lock:
            try:
                if self._stream is None:
                    self._stream = await asyncio.wait_for(
                        asyncio.open_unix_connection(self.path), 10
                    )
                reader, writer = self._stream
                writer.write(wire.frame(payload))
                await writer.drain()
                reply = await asyncio.wait_for(wire.read_message(reader), 60)
            except (OSError, TimeoutError, wire.WireError) as exc:
                self.close()
                raise KeySourceError(f"the owner's ssh-agent ({self.path}): {exc}") from None
            if reply is None:
                self.close()
                raise KeySourceError(f"the owner's ssh-agent ({self.path}) hung up")
            return reply

    async def identities(self) -> list[bytes]:
        """The blobs of the keys the owner's agent holds (its comments stay with it)."""
        r = wire.Reader(await self.call(bytes([wire.REQUEST_IDENTITIES])))
        try:
            if r.byte() != wire.IDENTITIES_ANSWER:
                return []
            blobs = []
            for _ in range(min(r.u32(), 1024)):
                blob = r.string()
                r.string()  # its comment: often a path of the owner's; not shown
                blobs.append(blob)
            return blobs
        except wire.WireError as exc:
            raise KeySourceError(f"the owner's ssh-agent sent a malformed list ({exc})") from None

    async def sign(self, key_blob: bytes, data: bytes, flags: int) -> bytes | None:
        request = (
            bytes([wire.SIGN_REQUEST])
            + wire.string(key_blob)
            + wire.string(data)
            + flags.to_bytes(4, "big")
        )
        r = wire.Reader(await self.call(request))
        try:
            if r.byte() != wire.SIGN_RESPONSE:
                return None
            return r.string()
        except wire.WireError:
            return None

    async def bind(self, message: bytes) -> None:
        """The checked bind, passed on: keys the owner added with destination
        constraints (`ssh-add -h`) are then checked by their own agent too."""
        await self.call(message)

    def close(self) -> None:
        if self._stream is not None:
            self._stream[1].close()
            self._stream = None


def known_host_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            _, _, salt, digest = pattern.split("|", 3)
            mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(mac, base64.b64decode(digest))
        except (ValueError, binascii.Error):
            return False
    # OpenSSH's patterns: `*` and `?` only (a `[` is the bracket of "[host]:port").
    regex = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()
    )
    return re.fullmatch(regex, name.lower()) is not None


def host_keys(path: str, host: str, port: int) -> set[bytes]:
    """The key blobs a known_hosts file lists for host:port (hashed names, patterns and
    negations as OpenSSH reads them; @revoked keys removed, @cert-authority lines not
    used: a host certificate is not accepted here)."""
    name = known_host_name(host, port)
    try:
        with open(path, "rb") as f:
            text = f.read(_KNOWN_HOSTS_MAX).decode("utf-8", "replace")
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise KeySourceError(f"cannot read the known_hosts file {path}: {exc}") from None
    keys: set[bytes] = set()
    revoked: set[bytes] = set()
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else ""
        if len(fields) < 3 or marker not in ("", "@revoked"):
            continue
        patterns = fields[0].split(",")
        if any(p.startswith("!") and _matches(p[1:], name) for p in patterns):
            continue
        if not any(not p.startswith("!") and _matches(p, name) for p in patterns):
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
            if wire.key_type(blob).decode() != fields[1]:
                continue
        except (binascii.Error, wire.WireError, UnicodeDecodeError):
            continue
        (revoked if marker else keys).add(blob)
    return keys - revoked
