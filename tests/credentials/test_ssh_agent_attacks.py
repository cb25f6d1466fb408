"""Attacks on the session's ssh-agent from inside the sandbox, through the real daemon:
each runs behind tests/sandbox/guard.py, which proves it is inside first.

The material is real: a real ssh login inside the sandbox, made with a man-in-the-middle
agent the attack runs itself, yields a genuine session bind (the host key's signature
over a real session id) and a genuine login request, which the attack then replays,
flips and rewrites against the daemon's agent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentd_client import Client
from tests.credentials.ssh_world import UNLISTED_HOST, SshWorld, Terminal
from tests.network.support import ALLOWED, GIT
from tests.sandbox._sandbox_attack import guarded_py
from tests.sandbox.conftest import sandbox_dir

pytestmark = pytest.mark.timeout(300)

ATTACK = r"""
import json, os, socket, struct, subprocess, sys, threading

AGENT = os.environ["SSH_AUTH_SOCK"]
SSH = os.environ["GIT_SSH_COMMAND"]  # ssh through the session's proxy

def s(b):
    return struct.pack(">I", len(b)) + b

def exact(c, n):
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data

def read(c):
    return exact(c, struct.unpack(">I", exact(c, 4))[0])

def conn():
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(60)
    c.connect(AGENT)
    return c

def call(c, payload):
    c.sendall(s(payload))
    return read(c)

def code(c, payload):
    try:
        return call(c, payload)[0]
    except (EOFError, OSError) as e:
        return f"closed: {e}"

def capture(host, port):
    # A real ssh login whose agent is this script: its bind and sign request are kept,
    # the key list comes from the daemon's agent, every signature is refused.
    path = os.path.join(os.environ["TMPDIR"], f"mitm-{host}-{port}.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)
    got = {}
    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            try:
                while True:
                    msg = read(c)
                    if msg[0] == 11:
                        reply = call(conn(), msg)
                    elif msg[0] == 27:
                        got.setdefault("bind", msg)
                        reply = b"\x06"
                    elif msg[0] == 13:
                        got.setdefault("sign", msg)
                        reply = b"\x05"
                    else:
                        reply = b"\x05"
                    c.sendall(s(reply))
            except Exception:
                c.close()
    threading.Thread(target=serve, daemon=True).start()
    cmd = (f"{SSH} -o IdentityAgent={path} -o UserKnownHostsFile=/dev/null "
           "-o StrictHostKeyChecking=no -o BatchMode=yes -o LogLevel=ERROR "
           f"-p {port} root@{host} true")
    # Captured: nothing of the proxy helper may hold ssh's pipes once ssh has exited.
    subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=60)
    srv.close()
    return got

def fields(msg, start):
    out, pos = [], start
    while pos < len(msg):
        n = struct.unpack(">I", msg[pos:pos + 4])[0]
        out.append(msg[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out

git_host, git_port, allowed_host, unlisted_host, stranger_port, key_file, owner_agent = sys.argv[1:]
out = {}
real = capture(git_host, int(git_port))
out["captured"] = sorted(real)
bind, sign = real["bind"], real["sign"]
# The sign request: key blob, data (the login request), flags.
key_blob, data = fields(sign[:-4], 1)[:2]
flags = sign[-4:]

out["sign_without_bind"] = code(conn(), sign)
c = conn()
out["forwarding_bind"] = code(c, bind[:-1] + b"\x01")
out["sign_after_forwarding_bind"] = code(c, sign)
out["list_after_forwarding_bind"] = code(c, b"\x0b")
c = conn()
out["genuine_bind"] = code(c, bind)
out["second_bind"] = code(c, bind)
out["sign_a_commit"] = code(c, b"\x0d" + s(key_blob) + s(b"tree 1234\nauthor x\n\nhi") + flags)
sid = data[4:4 + struct.unpack(">I", data[:4])[0]]
other = s(bytes([sid[0] ^ 1]) + sid[1:]) + data[4 + len(sid):]
out["sign_another_session"] = code(c, b"\x0d" + s(key_blob) + s(other) + flags)
for name, host in (("wrong_host_key", allowed_host), ("unlisted_host", unlisted_host)):
    got = capture(host, int(stranger_port))
    c = conn()
    out[name + "_bind"] = code(c, got["bind"])
    out[name + "_sign"] = code(c, got["sign"])

# Keys cannot be added, removed, locked or unlocked; no other request is served.
c = conn()
junk_key = s(b"ssh-ed25519") + s(b"\x01" * 32) + s(b"\x02" * 64) + s(b"comment")
for name, payload in (
    ("add", b"\x11" + junk_key),
    ("add_constrained", b"\x19" + junk_key + b"\x01\x00\x00\x00\x3c"),
    ("remove", b"\x12" + s(key_blob)),
    ("remove_all", b"\x13"),
    ("lock", b"\x16" + s(b"pw")),
    ("unlock", b"\x17" + s(b"pw")),
    ("add_smartcard", b"\x14" + s(b"/usr/lib/x.so") + s(b"")),
    ("remove_all_v1", b"\x09"),
    ("query_extension", b"\x1b" + s(b"query")),
    ("unknown", b"\xff"),
):
    out["req_" + name] = code(c, payload)
r = subprocess.run(["ssh-add", "-D"], capture_output=True, text=True)
out["ssh_add_D"] = r.returncode
subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                os.path.join(os.environ["TMPDIR"], "mine")], check=True)
r = subprocess.run(["ssh-add", os.path.join(os.environ["TMPDIR"], "mine")], capture_output=True)
out["ssh_add_key"] = r.returncode
answer = call(conn(), b"\x0b")
out["keys_after"] = struct.unpack(">I", answer[1:5])[0]
out["comments"] = fields(answer, 5)[1::2]
out["comments"] = [x.decode() for x in out["comments"]]

# Malformed and huge: bounded, answered or cut, and the agent goes on.
c = conn()
out["truncated_sign"] = code(c, b"\x0d" + s(b"abc")[:5])
out["after_truncated"] = code(c, b"\x0b")
c = conn()
c.sendall(b"\xff\xff\xff\xff")
out["huge_length"] = code(c, b"\x0b")
c = conn()
try:
    c.sendall(s(b"\x0d" + b"A" * (300 * 1024)))
    out["oversized"] = code(c, b"\x0b")
except OSError as e:
    out["oversized"] = f"closed: {e}"
c = conn()
c.sendall(b"\x00\x00\x00\x00")
out["zero_length"] = code(c, b"\x0b")
# Fuzz: bytes of every kind after each request type, and bad keys in a bind.
import random
rng = random.Random(21)
c = conn()
answers = set()
bad_keys = [b"", b"\x00" * 8, s(b"ssh-ed25519") + s(b"x"), s(b"ecdsa-sha2-nistp256")
            + s(b"nistp256") + s(b"\x04" + b"\x01" * 64), s(b"ssh-rsa") + s(b"\x01") + s(b"")]
for bad in bad_keys:
    bind_bad = b"\x1b" + s(b"session-bind@openssh.com") + s(bad) + s(b"sid") + s(b"sig") + b"\x00"
    answers.add(code(c, bind_bad))
    answers.add(code(c, b"\x0d" + s(bad) + s(data) + flags))
for _ in range(300):
    kind = rng.choice([11, 13, 27, 17, 18, 25])
    tail = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    if rng.random() < 0.5:
        tail = s(b"session-bind@openssh.com") + tail if kind == 27 else s(key_blob) + tail
    answers.add(code(c, bytes([kind]) + tail))
out["fuzz_answers"] = sorted(str(a) for a in answers)
out["after_fuzz"] = code(c, b"\x0b")
many = []
for _ in range(100):
    many.append(conn())
served = 0
for m in many:
    served += code(m, b"\x0b") == 12
out["served_of_100"] = served
for m in many:
    m.close()
out["after_all"] = code(conn(), b"\x0b")

# The secrets themselves: the key file and the owner's agent socket.
try:
    open(key_file).read()
    out["key_file"] = "READ"
except OSError as e:
    out["key_file"] = type(e).__name__
try:
    socket.socket(socket.AF_UNIX).connect(owner_agent)
    out["owner_agent"] = "CONNECTED"
except OSError as e:
    out["owner_agent"] = type(e).__name__
print("RESULT " + json.dumps(out))
"""

FAILURE, SUCCESS, IDENTITIES, EXT_FAILURE = 5, 6, 12, 28


@pytest.fixture(scope="module")
def attack(ssh_world: SshWorld):
    """The attack, run once inside one session's sandbox: (what it saw, client, session)."""
    workspace = sandbox_dir("agentd-ssh-attack-")
    with Client(ssh_world.daemon.socket, timeout=280) as client:
        sid = client.create_session(workspace).id
        client.update_permissions(sid, allow=["Bash"])
        # First a genuine login a person allows for the session ("always"): what the
        # attack asks for is then refused by the agent's checks, not for want of a yes.
        Path(workspace, "known_hosts").write_text(ssh_world.known_hosts_line + "\n")
        term = Terminal(client, sid, ("allow", "always"))
        try:
            login = client.run_tool(
                sid,
                "Bash",
                {
                    "command": f'sh -c "$GIT_SSH_COMMAND -o UserKnownHostsFile={workspace}/'
                    f"known_hosts -o BatchMode=yes -p {ssh_world.git_port} root@{GIT} "
                    'echo LOGGED-IN"'
                },
            ).text
        finally:
            term.close()
        assert "LOGGED-IN" in login and len(term.asked) == 1, login
        command = guarded_py(
            ATTACK,
            GIT,
            str(ssh_world.git_port),
            ALLOWED,
            UNLISTED_HOST,
            str(ssh_world.stranger_port),
            ssh_world.key_file,
            ssh_world.owner_agent,
        )
        r = client.run_tool(sid, "Bash", {"command": command, "timeout": 280_000})
        assert "RESULT " in r.text, r.text
        yield json.loads(r.text.split("RESULT ", 1)[1].splitlines()[0]), client, sid
    shutil.rmtree(workspace, ignore_errors=True)


def test_signatures_need_a_genuine_bind_to_a_configured_host(attack):
    out, _, _ = attack
    assert out["captured"] == ["bind", "sign"], out  # ssh really bound and asked
    assert out["sign_without_bind"] == FAILURE
    assert out["forwarding_bind"] == EXT_FAILURE
    assert out["sign_after_forwarding_bind"] == FAILURE
    assert out["list_after_forwarding_bind"] == FAILURE  # a remote host sees no key at all
    # The genuine bind is accepted: the refusals below are of what is asked, not of it.
    assert out["genuine_bind"] == SUCCESS
    assert out["second_bind"] == EXT_FAILURE
    assert out["sign_a_commit"] == FAILURE
    assert out["sign_another_session"] == FAILURE
    for name in ("wrong_host_key", "unlisted_host"):
        assert out[f"{name}_bind"] == EXT_FAILURE, out
        assert out[f"{name}_sign"] == FAILURE, out


def test_keys_cannot_be_added_removed_or_locked(attack, ssh_world: SshWorld):
    out, _, _ = attack
    refused = {k: v for k, v in out.items() if k.startswith("req_")}
    assert refused and all(v in (FAILURE, EXT_FAILURE) for v in refused.values()), refused
    assert out["ssh_add_D"] != 0 and out["ssh_add_key"] != 0, out
    assert out["keys_after"] == 3, out  # the owner's key and the daemon's two key files
    assert all(c.startswith("agentd SHA256:") for c in out["comments"]), out
    # The owner's agent still holds its key.
    held = subprocess.run(
        ["ssh-add", "-l"],
        env={**os.environ, "SSH_AUTH_SOCK": ssh_world.owner_agent},
        capture_output=True,
        text=True,
    )
    assert held.returncode == 0 and "ED25519" in held.stdout, held


def test_malformed_and_huge_messages_are_bounded(attack, ssh_world: SshWorld):
    out, client, sid = attack
    assert out["truncated_sign"] == FAILURE and out["after_truncated"] == IDENTITIES, out
    for name in ("huge_length", "oversized", "zero_length"):
        assert str(out[name]).startswith("closed"), out
    assert 0 < out["served_of_100"] < 100, out  # past the bound, connections are cut
    assert out["after_all"] == IDENTITIES, out
    # Every fuzzed request answered with a refusal (a bare list request may be answered).
    assert set(out["fuzz_answers"]) <= {"5", "28", "12"}, out
    assert out["after_fuzz"] == IDENTITIES, out
    assert client.run_tool(sid, "Bash", {"command": "echo alive"}).text.strip() == "alive"


def test_the_key_file_and_the_owners_agent_are_not_reachable(attack):
    out, _, _ = attack
    assert out["key_file"] in ("FileNotFoundError", "PermissionError"), out
    assert out["owner_agent"] in (
        "FileNotFoundError",
        "PermissionError",
        "ConnectionRefusedError",
    ), out


def test_another_sessions_agent_is_not_reachable(ssh_world: SshWorld):
    """Each session's agent lives in that session's own directory: from one session's
    sandbox, the other's socket path (known: beside its temp dir) leads nowhere."""
    workspace = sandbox_dir("agentd-ssh-other-")
    try:
        with Client(ssh_world.daemon.socket, timeout=120) as client:
            a = client.create_session(workspace, permission_mode="bypassPermissions").id
            b = client.create_session(workspace, permission_mode="bypassPermissions").id
            tmp_b = client.run_tool(b, "Bash", {"command": "echo $TMPDIR"}).text.strip()
            other = os.path.join(os.path.dirname(tmp_b), "ssh-agent", "agent.sock")
            assert os.path.exists(other)  # on the host: B's agent is there
            probe = (
                "import socket, sys\n"
                "try:\n"
                "    socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n"
                "    print('REACHED')\n"
                "except OSError as e:\n"
                "    print('REFUSED', type(e).__name__)\n"
            )
            r = client.run_tool(a, "Bash", {"command": guarded_py(probe, other)})
            assert "REFUSED" in r.text and "REACHED" not in r.text, r.text
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
