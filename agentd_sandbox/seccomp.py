"""The seccomp filter, generated with libseccomp (pyseccomp) and exported as BPF for bwrap.

Default allow; deny what Docker's default profile denies plus the ptrace family,
io_uring, TIOCSTI/TIOCLINUX, exotic socket families and personality flags. clone3
answers ENOSYS so libc falls back to clone, whose flags we can inspect. Only the
native architecture is in the filter: any other (i386 via int 0x80, x32) is killed.
"""

from __future__ import annotations

import errno
import functools
import os

import pyseccomp as sc

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


def build_filter() -> sc.SyscallFilter:
    """The filter as a libseccomp object (native arch only, bad arch kills)."""
    filt = sc.SyscallFilter(sc.ALLOW)
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    eperm = sc.ERRNO(errno.EPERM)
    native = sc.system_arch()
    for name in DOCKER_DENIED:
        nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if nr == -1:
            if native != sc.Arch.X86_64 or name not in _X86_64_NEW:
                continue  # does not exist on this architecture
            nr = _X86_64_NEW[name]
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


@functools.cache
def bpf_program() -> bytes:
    """The compiled BPF program (built once per process)."""
    try:
        filt = build_filter()
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


def bpf_fd() -> int:
    """A fresh fd, at offset 0, holding the BPF program, for bwrap's --seccomp.

    The caller passes it to the child (pass_fds) and closes its own copy after spawn;
    bwrap reads it and closes it before exec, so it never reaches the command.
    """
    fd = os.memfd_create("agentd-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, bpf_program())
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def pseudo_code() -> str:
    """libseccomp's readable rendering of the filter (for review and `check`)."""
    fd = os.memfd_create("agentd-seccomp-pfc", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb", closefd=True) as out:
            build_filter().export_pfc(out)
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 1 << 20).decode()
    finally:
        os.close(fd)
