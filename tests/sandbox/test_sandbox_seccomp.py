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
