"""The agent's parsing and checking alone: signatures from key files of each type
(made by ssh-keygen) verify and tampered ones do not; login requests parse as OpenSSH's
parse_userauth_request does; known_hosts reads as OpenSSH reads it."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from agentd.credentials import ssh_agent_wire as wire
from agentd.credentials.ssh_agent_keys import FileKey, host_keys


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FileKey]:
    base = tmp_path_factory.mktemp("keys")
    out = {}
    for kind in ("ed25519", "ecdsa", "rsa"):
        path = base / kind
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
        out[kind] = FileKey(str(path))
        # The blob is the public file's, as OpenSSH writes it.
        assert out[kind].blob == base64.b64decode(Path(f"{path}.pub").read_text().split()[1])
    return out


@pytest.mark.parametrize(("kind", "flags"), [("ed25519", 0), ("ecdsa", 0), ("rsa", 2), ("rsa", 4)])
def test_each_key_type_signs_and_only_its_signature_verifies(keys, kind, flags):
    key = keys[kind]
    signature = key.sign(b"session id", flags)
    assert wire.verify(key.blob, signature, b"session id")
    assert not wire.verify(key.blob, signature, b"another id")
    other = keys["ed25519" if kind != "ed25519" else "ecdsa"]
    assert not wire.verify(other.blob, signature, b"session id")
    r = wire.Reader(signature)
    alg, raw = r.string(), r.string()
    # The same bytes under another algorithm's name do not verify either.
    assert not wire.verify(key.blob, wire.string(b"ssh-dss") + wire.string(raw), b"session id")
    if kind == "rsa":
        assert alg == (b"rsa-sha2-512" if flags & 4 else b"rsa-sha2-256")


def _login(
    key: bytes,
    *,
    sid: bytes = b"S" * 32,
    type: int = 50,  # noqa: A002 - the field's name in RFC 4252
    user: bytes = b"git",
    service: bytes = b"ssh-connection",
    method: bytes = b"publickey",
    follows: int = 1,
    alg: bytes | None = None,
    blob: bytes | None = None,
    tail: bytes = b"",
) -> bytes:
    """A login request as ssh asks the agent to sign it, with one part changed."""
    return (
        wire.string(sid)
        + bytes([type])
        + wire.string(user)
        + wire.string(service)
        + wire.string(method)
        + bytes([follows])
        + wire.string(alg if alg is not None else wire.key_type(key))
        + wire.string(blob if blob is not None else key)
        + tail
    )


def test_a_login_request_parses_and_nothing_else_does(keys):
    blob = keys["ed25519"].blob
    auth = wire.parse_userauth(_login(blob), blob)
    assert (auth.session_id, auth.user, auth.host_key) == (b"S" * 32, "git", None)
    hostbound = _login(
        blob, method=b"publickey-hostbound-v00@openssh.com", tail=wire.string(b"HOSTKEY")
    )
    assert wire.parse_userauth(hostbound, blob).host_key == b"HOSTKEY"
    for bad in (
        _login(blob, sid=b""),
        _login(blob, type=51),
        _login(blob, service=b"other"),
        _login(blob, method=b"password"),
        _login(blob, follows=0),
        _login(blob, alg=b"ssh-rsa"),
        _login(blob, blob=keys["ecdsa"].blob),
        _login(blob, tail=b"x"),
        _login(blob)[:-3],
        b"tree 0123\nauthor a\n\ncommit message",
    ):
        with pytest.raises(wire.WireError):
            wire.parse_userauth(bad, blob)


def test_known_hosts_reads_as_openssh_does(tmp_path, keys):
    ed, ec, rsa = (keys[k] for k in ("ed25519", "ecdsa", "rsa"))

    def line(names: str, key: FileKey, marker: str = "") -> str:
        kind = wire.key_type(key.blob).decode()
        return f"{marker}{names} {kind} {base64.b64encode(key.blob).decode()}\n"

    plain = tmp_path / "plain"
    plain.write_text(
        "# comment\n\n"
        + line("git.example.com,10.0.0.1", ed)
        + line("[git.example.com]:2222", ec)
        + line("*.corp.example,!bad.corp.example", rsa)
        + line("revoked.example", ec)
        + line("revoked.example", ec, "@revoked ")
        + line("ca.example", ed, "@cert-authority ")
        + "git.example.com ssh-ed25519 !!notbase64\n"
        + f"git.example.com ssh-rsa {base64.b64encode(ed.blob).decode()}\n"  # type lies
    )
    assert host_keys(str(plain), "git.example.com", 22) == {ed.blob}
    assert host_keys(str(plain), "GIT.example.com", 22) == {ed.blob}
    assert host_keys(str(plain), "git.example.com", 2222) == {ec.blob}
    assert host_keys(str(plain), "a.corp.example", 22) == {rsa.blob}
    assert host_keys(str(plain), "bad.corp.example", 22) == set()
    assert host_keys(str(plain), "revoked.example", 22) == set()
    assert host_keys(str(plain), "ca.example", 22) == set()
    assert host_keys(str(tmp_path / "missing"), "git.example.com", 22) == set()
    hashed = tmp_path / "hashed"
    hashed.write_text(line("[git.example.com]:2222", ec))
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(hashed)], check=True)
    assert "git.example.com" not in hashed.read_text()
    assert host_keys(str(hashed), "git.example.com", 2222) == {ec.blob}
    assert host_keys(str(hashed), "git.example.com", 22) == set()
