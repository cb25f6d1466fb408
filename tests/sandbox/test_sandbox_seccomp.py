"""The seccomp filter: covers Docker's denied list, and each attack fails inside."""

from __future__ import annotations

import json
import signal

import pytest

from agentd_sandbox import seccomp
from tests.support.data import DOCKER_DENIED

from .conftest import NOT_SANDBOXED, policy, run_capture

DENIED_JSON = DOCKER_DENIED
ARG_FILTERED = {"clone", "clone3", "personality", "socket"}


@pytest.mark.skipif(not DENIED_JSON.exists(), reason="Docker denied list not present")
def test_filter_covers_every_docker_denied_syscall():
    denied = json.loads(DENIED_JSON.read_text())["denied"]
    names = {entry["syscall"] for entry in denied}
    missing = names - set(seccomp.DOCKER_DENIED) - ARG_FILTERED
    assert not missing, f"not denied: {sorted(missing)}"
    pfc = seccomp.pseudo_code()
    for name in ARG_FILTERED:
        assert f'"{name}"' in pfc


def test_filter_is_native_arch_only_and_kills_others():
    pfc = seccomp.pseudo_code()
    assert pfc.count("# filter for arch") == 1
    assert "invalid architecture action\naction KILL_PROCESS" in pfc


# Each is blocked with EPERM (clone3: ENOSYS); see attacks.c. Several would succeed or
# fail with another errno without the filter (tiocsti EBADF, sock_alg, keyctl, ptrace,
# personality, clone3, unshare_user), so they prove the filter itself is loaded.
ERRNO_ATTACKS = [
    "mount", "umount", "unshare_user", "unshare_ns", "setns", "clone_newuser", "clone3",
    "init_module", "finit_module", "bpf", "perf_event_open", "keyctl", "add_key",
    "userfaultfd", "io_uring_setup", "ptrace", "process_vm_readv", "personality",
    "personality_high", "tiocsti", "tiocsti_high", "tioclinux",
    "sock_packet", "sock_alg", "sock_vsock", "sock_raw",
]  # fmt: skip


@pytest.mark.parametrize("attack", ERRNO_ATTACKS)
async def test_attack_is_refused_inside(attack, attacks_bin, guarded, ws):
    res = await run_capture(policy(ws), guarded(attacks_bin, attack))
    assert res.rc != NOT_SANDBOXED, res.err
    assert res.rc == 0, f"{attack}: rc={res.rc} {res.out} {res.err}"


async def test_personality_query_still_works(attacks_bin, guarded, ws):
    res = await run_capture(policy(ws), guarded(attacks_bin, "personality_query"))
    assert res.rc == 0, res.out + res.err


@pytest.mark.parametrize("attack", ["x32", "i386"])
async def test_foreign_abi_is_killed(attack, attacks_bin, guarded, ws):
    res = await run_capture(policy(ws), guarded(attacks_bin, attack))
    assert res.rc != NOT_SANDBOXED, res.err
    assert res.rc == 128 + signal.SIGSYS, f"rc={res.rc} {res.out}"


# Syscalls the kernel has and Docker's profile does not name: each answers ENOSYS
# inside (a syscall the kernel gains later is unknown until the allow-list names it).
# Outside, the host kernel answers them (EBADF, ENOENT), so a sandbox that allowed
# them by default would answer the same.
NEWER_THAN_THE_PROFILE = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {
    "cachestat": (451, -1, 0, 0, 0),
    "fchmodat2": (452, -100, b"/nonexistent", 0, 0),
    "a number no kernel has": (1000,),
}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    got = libc.syscall(nr, *args)
    err = ctypes.get_errno()
    print(name, got, errno.errorcode.get(err, err))
    if got != -1 or err != errno.ENOSYS:
        sys.exit(1)
"""


async def test_a_syscall_the_profile_does_not_name_is_enosys(guarded_py, ws):
    res = await run_capture(policy(ws), guarded_py(NEWER_THAN_THE_PROFILE))
    assert res.rc != NOT_SANDBOXED, res.err
    assert res.rc == 0, res.out + res.err


def test_the_allow_list_is_dockers_profile():
    profile = json.loads(seccomp.DOCKER_PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = seccomp.docker_allowed(profile, "amd64")
    # Everyday calls are there; what needs a capability, or another architecture, is not.
    assert {"read", "openat", "clone", "execve", "futex", "rseq", "statx"} <= allowed
    assert not allowed & {"mount", "reboot", "init_module", "bpf", "s390_runtime_instr"}
    assert "arch_prctl" in allowed and "arch_prctl" not in seccomp.docker_allowed(profile, "arm64")
    pfc = seccomp.pseudo_code(seccomp.allow_list())
    assert "action ERRNO(38);" in pfc  # the default: ENOSYS
    assert "invalid architecture action\naction KILL_PROCESS" in pfc


# Programs people run, each under the two filters: what they call must be allowed.
EVERYDAY = [
    "git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x"
    " && git log --oneline | wc -l",
    "python3 -c 'import ssl, sqlite3, subprocess as s; print(s.run([\"true\"]).returncode)'",
    "tar czf a.tgz /etc/hostname 2>/dev/null; tar tzf a.tgz >/dev/null && echo tar",
    "sort -u /etc/passwd | head -c 10 >/dev/null && find . -maxdepth 1 | wc -l && echo ok",
    "gcc --version >/dev/null 2>&1 || true; sh -c 'sleep 0.1 & wait' && echo jobs",
]


@pytest.mark.parametrize("script", EVERYDAY)
async def test_everyday_programs_run(script, guarded, ws):
    res = await run_capture(policy(ws), guarded("bash", "-c", script))
    assert res.rc != NOT_SANDBOXED, res.err
    assert res.rc == 0, f"{script}: rc={res.rc} {res.out} {res.err}"
