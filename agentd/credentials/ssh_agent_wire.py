"""The ssh-agent protocol's bytes (draft-miller-ssh-agent, OpenSSH's PROTOCOL.agent):
framing with a bound, SSH wire strings, public key blobs and signatures checked with
`cryptography`, and the user-authentication request a signature may be asked for.

Everything here parses what a sandboxed process sent: a short or trailing byte is a
WireError, never an exception of another kind.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

# As OpenSSH's ssh-agent (AGENT_MAX_LEN, AGENT_MAX_SID_LEN): past them, the connection ends.
MAX_MESSAGE = 256 * 1024
MAX_SESSION_ID = 128

FAILURE = 5
SUCCESS = 6
REQUEST_IDENTITIES = 11
IDENTITIES_ANSWER = 12
SIGN_REQUEST = 13
SIGN_RESPONSE = 14
EXTENSION = 27
EXTENSION_FAILURE = 28
SESSION_BIND = b"session-bind@openssh.com"
# Sign request flags for RSA keys.
RSA_SHA2_256 = 0x02
RSA_SHA2_512 = 0x04
USERAUTH_REQUEST = 50

# Key types signed and verified: the name in the blob -> the curve's hash (ECDSA only).
_ECDSA_HASH: dict[bytes, type[hashes.HashAlgorithm]] = {
    b"ecdsa-sha2-nistp256": hashes.SHA256,
    b"ecdsa-sha2-nistp384": hashes.SHA384,
    b"ecdsa-sha2-nistp521": hashes.SHA512,
}
_RSA_HASH: dict[bytes, type[hashes.HashAlgorithm]] = {
    b"ssh-rsa": hashes.SHA1,
    b"rsa-sha2-256": hashes.SHA256,
    b"rsa-sha2-512": hashes.SHA512,
}
KEY_TYPES = frozenset({b"ssh-ed25519", b"ssh-rsa", *_ECDSA_HASH})

PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey


class WireError(ValueError):
    """A message that is not what the protocol says: short, too long, or trailing bytes."""


class Reader:
    """Reads SSH wire fields from one message, each bounded by what is left."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError("a field runs past the end of the message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.u32())

    def text(self) -> str:
        try:
            return self.string().decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("a name that is not UTF-8") from None

    def boolean(self) -> bool:
        return self.byte() != 0

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise WireError("bytes after the last field")


def string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def mpint(value: int) -> bytes:
    if value == 0:
        return string(b"")
    raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
    return string(raw)


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def status(ok: bool) -> bytes:
    return bytes([SUCCESS if ok else FAILURE])


async def read_message(reader: asyncio.StreamReader) -> bytes | None:
    """One message; None at a clean end of stream. A length past MAX_MESSAGE is refused
    before anything is read into memory."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise WireError("the stream ended inside a length") from None
        return None
    (length,) = struct.unpack(">I", head)
    if length == 0 or length > MAX_MESSAGE:
        raise WireError(f"a message of {length} bytes (at most {MAX_MESSAGE})")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise WireError("the stream ended inside a message") from None


def key_type(blob: bytes) -> bytes:
    return Reader(blob).string()


def public_key(blob: bytes) -> PublicKey:
    """The key a wire blob encodes (ed25519, ECDSA, RSA; no certificates)."""
    kind = key_type(blob)
    if kind not in KEY_TYPES:
        raise WireError(f"an unsupported key type {kind[:40]!r}")
    try:
        key = load_ssh_public_key(kind + b" " + base64.b64encode(blob))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise WireError(f"a malformed {kind.decode()} key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        raise WireError(f"an unsupported key type {kind.decode()}")
    return key


def fingerprint(blob: bytes) -> str:
    """As `ssh-keygen -l` prints it: SHA256:<unpadded base64>."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def verify(key_blob: bytes, signature: bytes, data: bytes) -> bool:
    """Whether `signature` (an SSH signature blob) is `key_blob`'s over `data`."""
    key = public_key(key_blob)
    kind = key_type(key_blob)
    r = Reader(signature)
    alg, raw = r.string(), r.string()
    r.end()
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            if alg != b"ssh-ed25519":
                return False
            key.verify(raw, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            if alg != kind:
                return False
            parts = Reader(raw)
            der = encode_dss_signature(parts.mpint(), parts.mpint())
            parts.end()
            key.verify(der, data, ec.ECDSA(_ECDSA_HASH[kind]()))
        else:
            if alg not in _RSA_HASH:
                return False
            key.verify(raw, data, padding.PKCS1v15(), _RSA_HASH[alg]())
    except InvalidSignature:
        return False
    return True


def rsa_algorithm(flags: int) -> bytes:
    """The RSA signature a sign request's flags ask for (SHA-1 only when none is named)."""
    if flags & RSA_SHA2_512:
        return b"rsa-sha2-512"
    if flags & RSA_SHA2_256:
        return b"rsa-sha2-256"
    return b"ssh-rsa"


def rsa_hash(alg: bytes) -> hashes.HashAlgorithm:
    return _RSA_HASH[alg]()


def ecdsa_hash(kind: bytes) -> hashes.HashAlgorithm:
    return _ECDSA_HASH[kind]()


class Userauth:
    """The SSH_MSG_USERAUTH_REQUEST a client asks the agent to sign (RFC 4252 section 7,
    OpenSSH's publickey-hostbound-v00 adds the server's host key)."""

    def __init__(self, session_id: bytes, user: str, key_blob: bytes, host_key: bytes | None):
        self.session_id = session_id
        self.user = user
        self.key_blob = key_blob
        self.host_key = host_key


def parse_userauth(data: bytes, key_blob: bytes) -> Userauth:
    """As OpenSSH's parse_userauth_request: anything else (a commit to sign, a challenge
    of another protocol) is a WireError."""
    r = Reader(data)
    session_id = r.string()
    if not session_id:
        raise WireError("an empty session identifier")
    if r.byte() != USERAUTH_REQUEST:
        raise WireError("not a user authentication request")
    user = r.text()
    service = r.text()
    method = r.text()
    if not r.boolean():
        raise WireError("a request without a signature")
    alg = r.string()
    blob = r.string()
    if service != "ssh-connection" or blob != key_blob:
        raise WireError("a request for another service or key")
    kind = key_type(key_blob)
    if alg != kind and not (kind == b"ssh-rsa" and alg in _RSA_HASH):
        raise WireError("a request naming another algorithm than the key's")
    host_key = None
    if method == "publickey-hostbound-v00@openssh.com":
        host_key = r.string()
    elif method != "publickey":
        raise WireError(f"an authentication method {method[:40]!r}")
    r.end()
    return Userauth(session_id, user, key_blob, host_key)
