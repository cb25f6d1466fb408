"""agentd_sandbox/linux.py: each wrapper does its call and turns a failure into OSError
with the call's errno (and the path). Calls that change a thread's identity or
namespace run in a thread of their own that ends after the test."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from agentd_sandbox import linux

T = TypeVar("T")

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def _in_thread(work: Callable[[], T]) -> T:
    box: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return box[0]


def test_openat2_opens_beneath_and_creates_with_mode(tmp_path: Path) -> None:
    root = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        fd = linux.openat2(root, "new", os.O_WRONLY | os.O_CREAT, 0o640, linux.RESOLVE_BENEATH)
        try:
            assert os.get_inheritable(fd) is False  # O_CLOEXEC always
            assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640 & ~_umask()
        finally:
            os.close(fd)
        # a mode without O_CREAT is dropped, not refused
        os.close(linux.openat2(root, "new", os.O_RDONLY, 0o600, linux.RESOLVE_BENEATH))
        os.close(linux.openat2(root, ".", os.O_PATH | os.O_DIRECTORY, 0o600))
    finally:
        os.close(root)


def test_openat2_refuses_leaving_the_root_and_links(tmp_path: Path) -> None:
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "link").symlink_to("/etc/passwd")
    root = os.open(tmp_path / "inner", os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as up:
            linux.openat2(root, "../x", os.O_RDONLY, resolve=linux.RESOLVE_BENEATH)
        assert up.value.errno == errno.EXDEV
        assert up.value.filename == "../x"
        with pytest.raises(OSError) as link:
            linux.openat2(root, "link", os.O_RDONLY, resolve=linux.RESOLVE_NO_SYMLINKS)
        assert link.value.errno == errno.ELOOP
        with pytest.raises(FileNotFoundError):
            linux.openat2(root, "missing", os.O_RDONLY)
    finally:
        os.close(root)


def test_faccessat2_answers_by_errno(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        linux.faccessat2(fd, "f", os.R_OK, linux.AT_EACCESS)
        with pytest.raises(FileNotFoundError):
            linux.faccessat2(fd, "missing", os.R_OK)
        linux.faccessat2(fd, "", os.R_OK, linux.AT_EMPTY_PATH)
    finally:
        os.close(fd)


def test_an_unknown_machine_gets_enosys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linux, "_NR", {})
    assert not linux.can_setgroups_thread()
    with pytest.raises(OSError) as exc:
        linux.setgroups_thread([])
    assert exc.value.errno == errno.ENOSYS


def test_prctl_failure_is_an_oserror() -> None:
    with pytest.raises(OSError) as exc:
        linux.prctl(0x7FFFFFFF)
    assert exc.value.errno == errno.EINVAL


def test_parent_death_signal_and_no_new_privs_in_a_child() -> None:
    pid = os.fork()
    if pid == 0:
        try:
            linux.set_parent_death_signal(signal.SIGKILL)
            linux.set_no_new_privs()
            status = Path("/proc/self/status").read_text()
            os._exit(0 if "NoNewPrivs:\t1" in status else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@root_only
def test_fs_ids_change_for_the_thread_only() -> None:
    def work() -> tuple[int, int, int, int]:
        before = linux.setfsuid(65534)
        linux.setfsgid(65534)
        now = (linux.fsuid(), linux.fsgid())
        linux.setfsuid(before)
        linux.setfsgid(0)
        return before, *now, linux.fsuid()

    before, uid, gid, after = _in_thread(work)
    assert (before, uid, gid, after) == (0, 65534, 65534, 0)
    assert linux.fsuid() == 0


@root_only
def test_setgroups_thread_changes_this_thread_only() -> None:
    mine = os.getgroups()

    def work() -> list[int]:
        linux.setgroups_thread([4242])
        return os.getgroups()

    assert _in_thread(work) == [4242]
    assert os.getgroups() == mine


@root_only
def test_capabilities_round_trip_on_a_thread() -> None:
    held = linux.capget()
    assert held.effective
    bit = held.effective & -held.effective  # the lowest capability this process holds

    def work() -> tuple[int, int]:
        caps = linux.capget()
        linux.capset(linux.Capabilities(caps.effective & ~bit, caps.permitted, caps.inheritable))
        dropped = linux.capget().effective
        linux.capset(caps)
        return dropped, linux.capget().effective

    dropped, back = _in_thread(work)
    assert not dropped & bit
    assert back == held.effective
    assert linux.capget() == held


@root_only
def test_unshare_and_setns_move_only_the_thread() -> None:
    mine = os.readlink("/proc/thread-self/ns/net")

    def work() -> tuple[str, str]:
        linux.unshare(linux.CLONE_NEWNET)
        fresh = os.readlink("/proc/thread-self/ns/net")
        fd = os.open(f"/proc/{os.getpid()}/ns/net", os.O_RDONLY)
        try:
            linux.setns(fd, linux.CLONE_NEWNET)
        finally:
            os.close(fd)
        return fresh, os.readlink("/proc/thread-self/ns/net")

    fresh, back = _in_thread(work)
    assert fresh != mine
    assert back == mine
    with pytest.raises(OSError) as exc:
        linux.setns(-1, linux.CLONE_NEWNET)
    assert exc.value.errno == errno.EBADF


@root_only
def test_mount_and_umount(tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    linux.mount("tmpfs", target, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "size=1m")
    try:
        assert os.stat(target).st_dev != os.stat(tmp_path).st_dev
    finally:
        linux.umount2(str(target), linux.MNT_DETACH)
    assert os.stat(target).st_dev == os.stat(tmp_path).st_dev
    with pytest.raises(OSError) as exc:
        linux.umount2(str(target))
    assert exc.value.errno == errno.EINVAL
    assert exc.value.filename == str(target)


@root_only
def test_file_handles_round_trip(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    handle, _ = linux.name_to_handle_at(linux.AT_FDCWD, str(tmp_path / "d"))
    mount = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = linux.open_by_handle_at(mount, handle, os.O_PATH)
        try:
            assert os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path / "d")
        finally:
            os.close(fd)
        with pytest.raises(OSError):
            linux.open_by_handle_at(mount, b"\x00" * 8, os.O_PATH)
    finally:
        os.close(mount)
    with pytest.raises(FileNotFoundError):
        linux.name_to_handle_at(linux.AT_FDCWD, str(tmp_path / "missing"))


@root_only
def test_fanotify_group_and_mark(tmp_path: Path) -> None:
    group = linux.fanotify_init(0x200, os.O_RDONLY)  # FAN_REPORT_FID
    try:
        dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            linux.fanotify_mark(group, 0x01, 0x100, dir_fd, ".")  # ADD, FAN_CREATE
            with pytest.raises(OSError) as exc:
                linux.fanotify_mark(group, 0x01, 0x100, dir_fd, "missing")
            assert exc.value.errno == errno.ENOENT
        finally:
            os.close(dir_fd)
    finally:
        os.close(group)
    with pytest.raises(OSError) as bad:
        linux.fanotify_init(0xFFFFFFFF, os.O_RDONLY)
    assert bad.value.errno == errno.EINVAL


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_shim_and_the_host_watch_load_no_sandbox_machinery() -> None:
    """They import this module (through the change reader) and start once per daemon:
    agentd_sandbox's bwrap, runner and probe stay unloaded until used."""
    code = (
        "import sys, agentd.runs.shim.supervisor, agentd.changes.hostwatch, agentd_sandbox; "
        "print(sorted(m for m in sys.modules if m.startswith('agentd_sandbox.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "['agentd_sandbox.errors',",
        "'agentd_sandbox.linux',",
        "'agentd_sandbox.policy']",
    ]


def test_the_packages_names_load_on_first_use() -> None:
    code = (
        "import agentd_sandbox.probe; "  # a submodule first: the names are still the package's
        "from agentd_sandbox import check, spawn, hides, SandboxProcess; "
        "print(callable(check), spawn.__name__, hides.__name__, SandboxProcess.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "spawn", "hides", "SandboxProcess"]
