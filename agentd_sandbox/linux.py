"""The Linux calls agentd makes that Python's `os` module does not offer, through libc.

One libc handle, one table of syscall numbers per architecture, one typed function per
call; every failure raises OSError with the call's errno (and the path, when there is
one), as `os` does. Only the standard library here: the shim's forkserver and the host
watch import this (through the change reader) and start fast.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass

# Syscalls glibc has no wrapper for (or whose wrapper does something else), by machine.
# openat2 and faccessat2 came after the architectures' tables were unified: one number.
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {"openat2": 437, "faccessat2": 439, "setgroups": 116},
    "aarch64": {"openat2": 437, "faccessat2": 439, "setgroups": 159},
    "riscv64": {"openat2": 437, "faccessat2": 439, "setgroups": 159},
    "ppc64le": {"openat2": 437, "faccessat2": 439, "setgroups": 81},
    "s390x": {"openat2": 437, "faccessat2": 439, "setgroups": 206},
}
_NR = SYSCALLS.get(platform.machine(), {"openat2": 437, "faccessat2": 439})

# openat2(2) resolve flags
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
# faccessat2(2) flags
AT_FDCWD = -100
AT_EACCESS = 0x200
AT_EMPTY_PATH = 0x1000
# namespaces and mounts
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MNT_DETACH = 0x2
# prctl(2)
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
# capabilities(7)
CAP_SYS_RESOURCE = 24
_CAP_VERSION_3 = 0x20080522
# An invalid id: setfsuid/setfsgid then only return the current one.
_QUERY_ID = 0xFFFFFFFF
_MAX_HANDLE = 128

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
_libc.prctl.restype = ctypes.c_int
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.mount.argtypes = [*[ctypes.c_char_p] * 3, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.setfsuid.argtypes = [ctypes.c_uint]
_libc.setfsuid.restype = ctypes.c_int
_libc.setfsgid.argtypes = [ctypes.c_uint]
_libc.setfsgid.restype = ctypes.c_int
_libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
_libc.fanotify_init.restype = ctypes.c_int
_libc.fanotify_mark.argtypes = [
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_uint64,
    ctypes.c_int,
    ctypes.c_char_p,
]
_libc.fanotify_mark.restype = ctypes.c_int
_libc.name_to_handle_at.argtypes = [
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_int,
]
_libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
_libc.open_by_handle_at.restype = ctypes.c_int


def _fail(call: str, path: str | bytes | None = None) -> OSError:
    """The errno of the call that just failed; with its path as `os` gives it, else
    with the call's name in the message."""
    err = ctypes.get_errno()
    if path is None:
        return OSError(err, f"{call}: {os.strerror(err)}")
    return OSError(err, os.strerror(err), os.fsdecode(path))


def _number(name: str) -> int:
    try:
        return _NR[name]
    except KeyError:
        raise OSError(
            errno.ENOSYS, f"agentd does not know the number of {name} on {platform.machine()}"
        ) from None


def openat2(dir_fd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """openat2(2): `path` opened from `dir_fd` with the `resolve` restrictions; O_CLOEXEC
    always. A mode is passed only with O_CREAT or O_TMPFILE (openat2 refuses one else)."""
    tmpfile = os.O_TMPFILE  # __O_TMPFILE | O_DIRECTORY: all of its bits, not any
    if not flags & os.O_CREAT and flags & tmpfile != tmpfile:
        mode = 0
    how = struct.pack("QQQ", flags | os.O_CLOEXEC, mode, resolve)
    buf = ctypes.create_string_buffer(how, len(how))
    fd = _libc.syscall(_number("openat2"), dir_fd, os.fsencode(path), buf, len(how))
    if fd < 0:
        raise _fail("openat2", path)
    return int(fd)


def faccessat2(dir_fd: int, path: str, mode: int, flags: int = 0) -> None:
    """faccessat2(2): raises OSError when the caller (AT_EACCESS: by its effective and
    file-system ids) may not access `path` beneath `dir_fd` with `mode`."""
    if _libc.syscall(_number("faccessat2"), dir_fd, os.fsencode(path), mode, flags) != 0:
        raise _fail("faccessat2", path)


def setgroups_thread(groups: list[int] | tuple[int, ...]) -> None:
    """The raw setgroups syscall: the calling thread's supplementary groups only (glibc's
    setgroups() changes every thread of the process)."""
    array = (ctypes.c_uint * max(1, len(groups)))(*groups)
    if _libc.syscall(_number("setgroups"), len(groups), array) != 0:
        raise _fail("setgroups")


def can_setgroups_thread() -> bool:
    """Whether this machine's setgroups number is known."""
    return "setgroups" in _NR


def setfsuid(uid: int) -> int:
    """Take file-system uid `uid` on this thread; the one held before. The call reports
    no error: read the id back with `fsuid()` to know it was taken."""
    return int(_libc.setfsuid(uid))


def setfsgid(gid: int) -> int:
    """Take file-system gid `gid` on this thread; the one held before (see setfsuid)."""
    return int(_libc.setfsgid(gid))


def fsuid() -> int:
    """This thread's file-system uid."""
    return int(_libc.setfsuid(_QUERY_ID))


def fsgid() -> int:
    """This thread's file-system gid."""
    return int(_libc.setfsgid(_QUERY_ID))


@dataclass(frozen=True, slots=True)
class Capabilities:
    """A thread's capability sets, as 64-bit masks (bit n: capability n)."""

    effective: int
    permitted: int
    inheritable: int


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def capget() -> Capabilities:
    """The calling thread's capabilities."""
    header = _CapHeader(_CAP_VERSION_3, 0)  # pid 0: the calling thread
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        raise _fail("capget")
    return Capabilities(
        effective=data[0].effective | data[1].effective << 32,
        permitted=data[0].permitted | data[1].permitted << 32,
        inheritable=data[0].inheritable | data[1].inheritable << 32,
    )


def capset(caps: Capabilities) -> None:
    """Set the calling thread's capabilities (only other threads' are untouched)."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    for i in (0, 1):
        data[i].effective = (caps.effective >> 32 * i) & 0xFFFFFFFF
        data[i].permitted = (caps.permitted >> 32 * i) & 0xFFFFFFFF
        data[i].inheritable = (caps.inheritable >> 32 * i) & 0xFFFFFFFF
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("capset")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2); its result (raises OSError when it fails)."""
    result = _libc.prctl(option, arg2, arg3, arg4, arg5)
    if result < 0:
        raise _fail("prctl")
    return int(result)


def set_parent_death_signal(signum: int) -> None:
    """Be sent `signum` when the thread that forked this process ends."""
    prctl(PR_SET_PDEATHSIG, signum)


def set_no_new_privs() -> None:
    """No exec from here on gains privileges (setuid bits, file capabilities)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def unshare(flags: int) -> None:
    """unshare(2) for the calling thread (CLONE_NEWNET) or its next children (NEWPID)."""
    if _libc.unshare(flags) != 0:
        raise _fail("unshare")


def setns(fd: int, nstype: int) -> None:
    """setns(2): join the namespace `fd` refers to."""
    if _libc.setns(fd, nstype) != 0:
        raise _fail("setns")


def mount(
    source: str | bytes | None,
    target: str | bytes,
    fstype: str | bytes | None,
    flags: int,
    data: str | bytes | None = None,
) -> None:
    """mount(2)."""

    def enc(value: str | bytes | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    if _libc.mount(enc(source), os.fsencode(target), enc(fstype), flags, enc(data)) != 0:
        raise _fail("mount", target)


def umount2(target: str | bytes, flags: int = 0) -> None:
    """umount2(2)."""
    if _libc.umount2(os.fsencode(target), flags) != 0:
        raise _fail("umount2", target)


def fanotify_init(flags: int, event_f_flags: int) -> int:
    """fanotify_init(2): a new group's descriptor (needs CAP_SYS_ADMIN)."""
    fd = _libc.fanotify_init(flags, event_f_flags)
    if fd < 0:
        raise _fail("fanotify_init")
    return int(fd)


def fanotify_mark(group: int, flags: int, mask: int, dir_fd: int, path: str | bytes) -> None:
    """fanotify_mark(2) on `path` beneath `dir_fd`."""
    if _libc.fanotify_mark(group, flags, mask, dir_fd, os.fsencode(path)) != 0:
        raise _fail("fanotify_mark", path)


def name_to_handle_at(dir_fd: int, path: str | bytes, flags: int = 0) -> tuple[bytes, int]:
    """name_to_handle_at(2): the file's handle as open_by_handle_at takes it (struct
    file_handle: its size, its type, its bytes) and its mount id."""
    buf = ctypes.create_string_buffer(struct.pack("<Ii", _MAX_HANDLE, 0) + bytes(_MAX_HANDLE))
    mount_id = ctypes.c_int()
    if _libc.name_to_handle_at(dir_fd, os.fsencode(path), buf, ctypes.byref(mount_id), flags):
        raise _fail("name_to_handle_at", path)
    size = struct.unpack_from("<I", buf.raw)[0]
    return buf.raw[: 8 + size], mount_id.value


def open_by_handle_at(mount_fd: int, handle: bytes, flags: int) -> int:
    """open_by_handle_at(2) (needs CAP_DAC_READ_SEARCH): `handle` as name_to_handle_at
    gives it, beneath the filesystem of `mount_fd`; O_CLOEXEC always."""
    fd = _libc.open_by_handle_at(mount_fd, handle, flags | os.O_CLOEXEC)
    if fd < 0:
        raise _fail("open_by_handle_at")
    return int(fd)
