"""Filesystem, identity, pid and fd containment."""

from __future__ import annotations

import os
import socket
import uuid

from agentd_sandbox import SandboxPolicy
from agentd_sandbox.identity import DEFAULT_UID

from .conftest import NOT_SANDBOXED, policy, run_capture, sandbox_dir

WRITE_EACH = """
import sys
ok = []
for path in sys.argv[1:]:
    try:
        open(path, "w").write("x")
        ok.append(path)
    except OSError:
        pass
print("WROTE", ok)
"""


async def test_writes_outside_workspace_refused(ws, guarded_py):
    name = f"agentd-sbx-{uuid.uuid4().hex}"
    targets = [f"/etc/{name}", f"/usr/{name}", f"/root/{name}", f"/var/tmp/{name}"]
    res = await run_capture(policy(ws), guarded_py(WRITE_EACH, *targets, f"{ws}/ok"))
    assert res.rc == 0, res.err
    assert f"WROTE ['{ws}/ok']" in res.out
    for target in targets:
        assert not os.path.exists(target)


async def test_sandbox_tmp_is_not_host_tmp(ws, guarded_py):
    name = f"/tmp/agentd-sbx-{uuid.uuid4().hex}"
    res = await run_capture(policy(ws), guarded_py(WRITE_EACH, name))
    assert res.rc == 0, res.err
    assert not os.path.exists(name)


async def test_workspace_files_belong_to_sandbox_uid(ws, guarded):
    res = await run_capture(policy(ws), guarded("touch", f"{ws}/made"))
    assert res.rc == 0, res.err
    assert os.stat(f"{ws}/made").st_uid == (DEFAULT_UID if os.geteuid() == 0 else os.geteuid())


READ_EACH = """
import sys
for path in sys.argv[1:]:
    try:
        print("READ", path, repr(open(path).read()))
    except OSError as e:
        print("DENIED", path, e.errno)
"""


def _tree(root: str) -> list[str]:
    return sorted(os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs)


async def test_secrets_in_home_and_hidden_paths_unreadable(ws, guarded_py, monkeypatch):
    home = sandbox_dir("agentd-sbx-home-")
    state = sandbox_dir("agentd-sbx-state-")
    os.makedirs(f"{home}/.ssh")
    os.makedirs(f"{home}/.aws")
    # World-readable on purpose: only the sandbox's hiding may stop these reads.
    for path, text in [
        (f"{home}/.ssh/id_rsa", "PRIVATE"),
        (f"{home}/.aws/credentials", "AK"),
        (f"{home}/.netrc", "machine x"),
        (f"{state}/db", "STATE"),
    ]:
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
    for d in (f"{home}/.ssh", f"{home}/.aws"):
        os.chmod(d, 0o755)
    sock_path = f"{state}/agentd.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sock_path)
    os.chmod(sock_path, 0o777)
    listener.listen()
    before = _tree(home)
    monkeypatch.setenv("HOME", home)  # the invoking user's home
    targets = [
        f"{home}/.ssh/id_rsa",
        f"{home}/.aws/credentials",
        f"{home}/.netrc",
        f"{state}/db",
        "/etc/shadow",
    ]
    code = (
        READ_EACH
        + f"""
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({sock_path!r}); print("CONNECTED")
except OSError as e:
    print("NOCONNECT", e.errno)
"""
    )
    try:
        res = await run_capture(policy(ws, hidden=[state]), guarded_py(code, *targets))
        assert res.rc == 0, res.err
        assert "READ" not in res.out, res.out
        assert res.out.count("DENIED") == len(targets)
        assert "NOCONNECT" in res.out
        assert _tree(home) == before  # no placeholder files left behind
    finally:
        listener.close()
        import shutil

        shutil.rmtree(home)
        shutil.rmtree(state)


PIDS = """
import os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("PIDS", pids)
print("INIT", open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode())
try:
    open("/proc/sys/kernel/hostname", "w").write("pwned")
    print("SYSCTL WRITTEN")
except OSError as e:
    print("SYSCTL DENIED", e.errno)
"""


async def test_host_pids_invisible_and_proc_sys_read_only(ws, guarded_py):
    res = await run_capture(policy(ws), guarded_py(PIDS))
    assert res.rc == 0, res.err
    pids = eval(res.out.split("PIDS ", 1)[1].splitlines()[0])
    assert max(pids) < 10 and len(pids) <= 3, pids
    assert "INIT /usr/bin/bwrap" in res.out
    with open("/proc/1/cmdline", "rb") as f:
        assert b"bwrap" not in f.read()
    assert "SYSCTL DENIED" in res.out


async def test_only_std_fds_cross(ws, guarded):
    leaked = os.open("/etc/hostname", os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        res = await run_capture(policy(ws), guarded("sh", "-c", "ls /proc/$$/fd"))
    finally:
        os.close(leaked)
    assert res.rc == 0, res.err
    assert res.out.split() == ["0", "1", "2"]


async def test_not_root_and_no_capabilities(ws, guarded):
    res = await run_capture(policy(ws), guarded("cat", "/proc/self/status"))
    assert res.rc == 0, res.err
    status = dict(line.split(":", 1) for line in res.out.splitlines() if ":" in line)
    assert all(u != "0" for u in status["Uid"].split())
    assert all(g != "0" for g in status["Gid"].split())
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        assert int(status[cap], 16) == 0, cap
    assert status["Seccomp"].strip() == "2"
    assert status["NoNewPrivs"].strip() == "1"


async def test_environment_is_cleared_and_allow_listed(ws, guarded, monkeypatch):
    monkeypatch.setenv("AGENTD_SECRET_TOKEN", "leak")
    pol = policy(ws, env={"SESSION_VAR": "1"})
    res = await run_capture(pol, guarded("env"))
    assert res.rc == 0, res.err
    names = {line.split("=", 1)[0] for line in res.out.splitlines()}
    assert "AGENTD_SECRET_TOKEN" not in names
    assert {"PATH", "HOME", "LANG", "TERM", "SESSION_VAR"} <= names


async def test_guard_refuses_outside_sandbox(guarded):
    import subprocess

    rc = subprocess.run(guarded("true"), capture_output=True).returncode
    assert rc == NOT_SANDBOXED


def test_default_policy_has_no_writable_paths():
    assert SandboxPolicy().writable == [] and SandboxPolicy().network is False
