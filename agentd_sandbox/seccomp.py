"""The seccomp filters, generated with libseccomp (pyseccomp) and exported as BPF for bwrap.

Two filters, both installed (bwrap's --add-seccomp-fd); the kernel runs every filter
and takes the strictest answer, so a syscall runs only when both allow it:

1. Docker's allow-list (`allow_list`): the syscalls Docker's default profile allows a
   container with no added capabilities, on this architecture; everything else answers
   ENOSYS, so a syscall added to the kernel later is unknown here until this list names
   it (and libc, seeing ENOSYS, falls back as on an older kernel). The syscalls Docker
   denies answer EPERM, as they always have. The profile is vendored as
   docker_seccomp_default.json (see DOCKER_PROFILE_SOURCE).
2. agentd's denials on top (`build_filter`): what Docker denies plus the ptrace family,
   io_uring, TIOCSTI/TIOCLINUX, exotic socket families and personality flags; clone3
   answers ENOSYS so libc falls back to clone, whose namespace flags are refused.
   Argument rules live here only: libseccomp lets an unconditional allow override them.

Only the native architecture is in either filter: any other (i386 via int 0x80, x32)
is killed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
from pathlib import Path
from typing import Any

import pyseccomp as sc

DOCKER_PROFILE = Path(__file__).with_name("docker_seccomp_default.json")
DOCKER_PROFILE_SOURCE = (
    "moby profiles/seccomp/default.json as Debian 12 ships it in "
    "golang-github-docker-docker-dev 20.10.24+dfsg1-1+deb12u1 "
    "(usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json), "
    "unchanged; sha256 e5e91f884647e7332b3f89280777752f563df4f1372a186f14ddb7bf2f55cf61"
)
# Docker's names for libseccomp's architectures (the profile's `arches` includes).
_DOCKER_ARCH = {
    sc.Arch.X86_64: "amd64",
    sc.Arch.X86: "x86",
    sc.Arch.X32: "x32",
    sc.Arch.AARCH64: "arm64",
    sc.Arch.ARM: "arm",
    sc.Arch.PPC64LE: "ppc64le",
    sc.Arch.S390X: "s390x",
    sc.Arch.S390: "s390",
    sc.Arch.RISCV64: "riscv64",
}

# Docker's default profile denies these outright (see
# ../shared/security/docker_seccomp_denied.json); tests check this list covers it.
DOCKER_DENIED: tuple[str, ...] = (
    "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms", "kexec_load", "kexec_file_load", "reboot",
    "mount", "umount2", "umount", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "open_tree_attr", "mount_setattr",
    "swapon", "swapoff", "quotactl", "quotactl_fd", "unshare", "setns",
    "bpf", "perf_event_open", "lookup_dcookie", "fanotify_init", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "add_key", "keyctl", "request_key", "syslog", "open_by_handle_at",
    "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "process_madvise", "settimeofday", "clock_settime", "stime", "iopl", "ioperm",
    "mbind", "set_mempolicy", "get_mempolicy", "set_mempolicy_home_node",
    "move_pages", "migrate_pages", "vm86", "vm86old", "acct", "sethostname",
    "setdomainname", "vhangup", "_sysctl", "sysfs", "ustat", "uselib", "nfsservctl",
    "afs_syscall", "getpmsg", "putpmsg", "security", "tuxcall", "vserver",
    "file_getattr", "file_setattr", "listns", "uprobe", "rseq_slice_yield",
)  # fmt: skip

# x86_64 numbers of syscalls newer than the libseccomp this may run with (2.5.4 knows
# none of these); libseccomp takes raw numbers for the native arch.
_X86_64_NEW: dict[str, int] = {
    "uprobe": 336,
    "lsm_get_self_attr": 459,
    "lsm_set_self_attr": 460,
    "lsm_list_modules": 461,
    "open_tree_attr": 467,
    "file_getattr": 468,
    "file_setattr": 469,
    "listns": 470,
    "rseq_slice_yield": 471,
}

CLONE_NS_FLAGS: tuple[int, ...] = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
AF_PACKET, AF_ALG, AF_VSOCK = 17, 38, 40
PER_QUERY = 0xFFFFFFFF
_U32 = 0xFFFFFFFF


class FilterError(RuntimeError):
    """libseccomp could not build the filter."""


def docker_allowed(profile: dict[str, Any], arch: str) -> set[str]:
    """The syscalls Docker's `profile` allows on `arch` to a container that was given no
    capability: its allow entries that need no capability and whose arches include
    `arch`. An entry with argument conditions (clone, personality) counts: agentd's own
    filter holds the arguments."""
    allowed: set[str] = set()
    for entry in profile["syscalls"]:
        includes = entry.get("includes") or {}
        excludes = entry.get("excludes") or {}
        if entry.get("action") != "SCMP_ACT_ALLOW" or includes.get("caps"):
            continue
        if includes.get("arches") and arch not in includes["arches"]:
            continue
        if arch in (excludes.get("arches") or []):
            continue
        allowed.update(entry["names"])
    return allowed


def _native_number(name: str) -> int | None:
    """The native number of `name`, or None where it does not exist."""
    try:
        nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
    except ValueError:
        nr = -1
    if nr < 0:
        if sc.system_arch() != sc.Arch.X86_64 or name not in _X86_64_NEW:
            return None
        nr = _X86_64_NEW[name]
    return int(nr)


def allow_list() -> sc.SyscallFilter:
    """Docker's allow-list as a filter: ENOSYS by default, EPERM for what Docker denies."""
    profile = json.loads(DOCKER_PROFILE.read_text())
    arch = _DOCKER_ARCH.get(sc.system_arch())
    if arch is None:
        raise FilterError(f"Docker's profile names no architecture for {sc.system_arch()}")
    filt = sc.SyscallFilter(sc.ERRNO(errno.ENOSYS))
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        filt.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # a binary tree: ~350 names, not a chain
    denied = set(DOCKER_DENIED)
    for name in sorted(docker_allowed(profile, arch) - denied):
        nr = _native_number(name)
        if nr is not None:
            filt.add_rule(sc.ALLOW, nr)
    eperm = sc.ERRNO(errno.EPERM)
    for name in sorted(denied):
        nr = _native_number(name)
        if nr is not None:
            filt.add_rule(eperm, nr)
    return filt


def build_filter() -> sc.SyscallFilter:
    """The filter as a libseccomp object (native arch only, bad arch kills)."""
    filt = sc.SyscallFilter(sc.ALLOW)
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    eperm = sc.ERRNO(errno.EPERM)
    native = sc.system_arch()
    for name in DOCKER_DENIED:
        nr = _native_number(name)
        if nr is not None:  # else it does not exist on this architecture
            filt.add_rule(eperm, nr)
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    clone_flags_arg = 1 if native in (sc.Arch.S390, sc.Arch.S390X) else 0
    for flag in CLONE_NS_FLAGS:
        filt.add_rule(eperm, "clone", sc.Arg(clone_flags_arg, sc.MASKED_EQ, flag, flag))
    for request in (TIOCSTI, TIOCLINUX):
        filt.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, _U32, request))
    for family in (AF_PACKET, AF_ALG, AF_VSOCK):
        filt.add_rule(eperm, "socket", sc.Arg(0, sc.MASKED_EQ, _U32, family))
    _deny_personality_except_linux_and_query(filt, eperm)
    return filt


def _deny_personality_except_linux_and_query(filt: sc.SyscallFilter, action: int) -> None:
    """Allow personality(0) and personality(0xffffffff) only.

    libseccomp cannot compare one argument twice in a rule, so the complement is built
    from single comparisons: any bit above 32, or a 32-bit value that is neither all
    zeros nor all ones, which always has some set bit i followed (cyclically) by a
    clear bit i+1.
    """
    filt.add_rule(action, "personality", sc.Arg(0, sc.GT, _U32))
    for bit in range(32):
        mask = (1 << bit) | (1 << ((bit + 1) % 32))
        filt.add_rule(action, "personality", sc.Arg(0, sc.MASKED_EQ, mask, 1 << bit))


def _compiled(filt: sc.SyscallFilter) -> bytes:
    try:
        fd = os.memfd_create("agentd-seccomp-build", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(fd), "wb", closefd=True) as out:
                filt.export_bpf(out)
            os.lseek(fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise FilterError(f"libseccomp could not build the filter: {exc}") from exc
    return b"".join(chunks)


@functools.cache
def bpf_program() -> bytes:
    """agentd's denials, compiled (built once per process)."""
    try:
        filt = build_filter()
    except OSError as exc:
        raise FilterError(f"libseccomp could not build the filter: {exc}") from exc
    return _compiled(filt)


@functools.cache
def allow_list_program() -> bytes:
    """Docker's allow-list, compiled (built once per process)."""
    try:
        filt = allow_list()
    except (OSError, ValueError) as exc:
        raise FilterError(f"cannot read Docker's profile ({DOCKER_PROFILE}): {exc}") from exc
    return _compiled(filt)


def bpf_fds() -> tuple[int, ...]:
    """Fresh fds, at offset 0, one per filter (the allow-list, agentd's denials), for
    bwrap's --add-seccomp-fd.

    The caller passes them to the child (pass_fds) and closes its own copies after
    spawn; bwrap reads each and closes it before exec, so none reaches the command.
    """
    fds: list[int] = []
    try:
        for name, program in (("allow-list", allow_list_program()), ("denials", bpf_program())):
            fd = os.memfd_create(f"agentd-seccomp-{name}", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, program)
            os.lseek(fd, 0, os.SEEK_SET)
    except (OSError, FilterError):
        for fd in fds:
            os.close(fd)
        raise
    return tuple(fds)


def pseudo_code(filt: sc.SyscallFilter | None = None) -> str:
    """libseccomp's readable rendering of `filt`, agentd's denials by default (for
    review and `check`)."""
    fd = os.memfd_create("agentd-seccomp-pfc", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb", closefd=True) as out:
            (filt or build_filter()).export_pfc(out)
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 1 << 20).decode()
    finally:
        os.close(fd)
