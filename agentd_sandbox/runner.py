"""Start a command in the sandbox: the API the daemon uses (`spawn`) and the CLI's (`run`).

A root spawner with agentd-launch built (launcher.py) execs it alone in front of bwrap:
it does every step below in one process and its fork, in the same order. Otherwise the
chain is `sh` (joins the control group, when the policy names one: see
cgroups.join_prefix) -> `setpriv` (drops to the sandbox identity, arms the parent-death
signal) -> `unshare --pid --kill-child` -> `prlimit` (rlimits) -> bwrap, which reads
its options from a memfd (`--args`) so they never show in the host's `ps`. A root
daemon has unshare make the pid namespace as root (no user namespace needed for it)
and drop to the identity in its child, so setpriv only arms the parent-death signal
(see root_pid_namespace_prefix); the kill chain below is the same.

No orphan at any moment: bwrap's monitor clones the sandbox's init, which then waits on
an eventfd until the monitor has set it up, and arms its own parent-death signal only
after that. If the monitor dies in between (the spawner was killed, so setpriv's
PDEATHSIG took the monitor), the init either blocks forever in `eventfd_read` or runs
the command with nothing watching it. So bwrap itself runs as pid 1 of an outer pid
namespace made by `unshare --kill-child`: whenever bwrap dies, the kernel kills every
process of that namespace, the init and all it started included, whatever they were
doing; and unshare dies with the spawner (setpriv's PDEATHSIG), killing bwrap.

PDEATHSIG armed after the parent has died never fires, and setpriv, unshare and bwrap
each arm theirs a moment after a fork or exec. So bwrap also writes its start-up info
(`--info-fd`) into a pipe whose only read end the spawner holds, right after arming its
own: if the spawner is gone by then the write fails and bwrap exits (taking the
namespace with it); if the write succeeds, the spawner was alive when bwrap armed, and
its death will reach bwrap through unshare.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import os
import signal
import stat
import subprocess
from dataclasses import dataclass
from typing import Any

from . import binaries, bwrap, cgroups, identity, launcher, limits, seccomp
from .errors import SandboxUnavailable
from .policy import SandboxPolicy


@dataclass
class Launch:
    """Everything needed to exec one sandboxed command."""

    argv: list[str]
    seccomp_fds: tuple[int, ...]
    popen_kwargs: dict[str, Any]
    args_fd: int | None = None
    ident: identity.Identity | None = None
    # Our end of bwrap's info pipe (a file object, so a caller that drops the Launch
    # closes it) and the child's end (see the module docstring).
    lifeline: io.FileIO | None = None
    info_fd: int | None = None
    # The descriptors bwrap binds (bwrap.build_argv): it closes each once it is mounted.
    mount_fds: list[int] = dataclasses.field(default_factory=list)

    def close(self) -> None:
        """Close the parent's copies of the fds the child has; the lifeline stays open."""
        for fd in (*self.seccomp_fds, self.args_fd, self.info_fd, *self.mount_fds):
            if fd is not None:
                os.close(fd)
        self.mount_fds = []


def prepare(policy: SandboxPolicy, command: list[str], pass_fds: tuple[int, ...] = ()) -> Launch:
    """Build the argv and subprocess arguments, or raise SandboxUnavailable.

    `pass_fds` are inherited by the command (bwrap passes open fds through).
    """
    bwrap_path = bwrap.find_bwrap()
    if bwrap_path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap)"
        )
    ident = identity.resolve(policy)
    probe_failure = _probe(bwrap_path, ident)
    if probe_failure:
        raise SandboxUnavailable(probe_failure)
    one_exec = launcher.prefix(policy, ident)
    netns = _netns_prefix(policy) if one_exec is None else []
    try:
        filters = seccomp.bpf_fds()
    except (seccomp.FilterError, OSError) as exc:
        raise SandboxUnavailable(f"cannot build the seccomp filter: {exc}") from exc
    lifeline, info_fd = os.pipe2(os.O_CLOEXEC)
    mount_fds: list[int] = []
    try:
        argv, mount_list = bwrap.build_argv(
            policy, command, identity=ident, bwrap=bwrap_path, seccomp_fds=filters
        )
        mount_fds = mount_list.fds
        argv = [argv[0], "--info-fd", str(info_fd), *argv[1:]]
        argv, args_fd = _options_through_fd(argv, len(command))
    except BaseException:
        for end in (*filters, lifeline, info_fd, *mount_fds):
            os.close(end)
        raise
    kwargs: dict[str, Any] = {
        "close_fds": True,
        "pass_fds": (*filters, args_fd, info_fd, *mount_fds, *pass_fds),
        "start_new_session": True,
        "env": {},
    }
    if one_exec is not None:
        ours = io.FileIO(lifeline, "rb", closefd=True)
        return Launch([*one_exec, *argv], filters, kwargs, args_fd, ident, ours, info_fd, mount_fds)
    drop = identity.setpriv_prefix(ident)
    pidns, unshare_drops = orphan_guard_prefix(ident, bool(drop))
    if unshare_drops:
        # unshare drops to the identity itself: setpriv only arms the death signal.
        drop = identity.setpriv_prefix(dataclasses.replace(ident, switch=False))
    if not drop:
        if policy.cgroup_procs and ident.switch:
            _close(*filters, lifeline, info_fd, args_fd)
            raise SandboxUnavailable(
                "setpriv (util-linux) is needed to start a sandbox in its control group: "
                "install util-linux"
            )
        kwargs.update(identity.popen_kwargs(ident))
    prefix = limits.prlimit_prefix(policy.limits)
    if not prefix:
        lim = policy.limits
        kwargs["preexec_fn"] = lambda: limits.apply_in_child(lim)
    # First, while the spawner's privileges still hold: the group before anything runs.
    join = cgroups.join_prefix(policy.cgroup_procs)
    argv = [*join, *netns, *drop, *pidns, *prefix, *argv]
    ours = io.FileIO(lifeline, "rb", closefd=True)
    return Launch(argv, filters, kwargs, args_fd, ident, ours, info_fd, mount_fds)


def _netns_prefix(policy: SandboxPolicy) -> list[str]:
    """nsenter into the session's kept network namespace (policy.netns), while the
    spawner's privileges still hold (joining one takes CAP_SYS_ADMIN); bwrap then keeps
    it instead of unsharing the network."""
    if policy.network or not policy.netns:
        return []
    path = binaries.find("nsenter")
    if path is None:
        raise SandboxUnavailable(
            "nsenter (util-linux) is needed to join the session's network namespace: "
            "install util-linux"
        )
    return [path, f"--net={policy.netns}", "--"]


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


def _options_through_fd(argv: list[str], command_len: int) -> tuple[list[str], int]:
    """bwrap's options moved into a memfd it reads with `--args FD`.

    The options carry the session's environment, paths and the like, which other users
    would otherwise read in `ps`. bwrap 0.8 drops whatever follows `--` in an --args
    file, so the command itself stays on the command line.
    """
    options = argv[1 : len(argv) - command_len - 1]
    args_fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    try:
        os.write(args_fd, b"".join(os.fsencode(a) + b"\0" for a in options))
        os.lseek(args_fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(args_fd)
        raise
    return [argv[0], "--args", str(args_fd), "--", *argv[len(argv) - command_len :]], args_fd


def orphan_guard_prefix(ident: identity.Identity, dropping: bool) -> tuple[tuple[str, ...], bool]:
    """The pid-namespace prefix a start of `ident` uses (empty: none can be made here), and
    whether it drops to `ident` itself: the root variant when the spawner drops ids
    (`dropping`: setpriv is there) and is root, else the user-namespace one."""
    if dropping and ident.switch and (prefix := root_pid_namespace_prefix(ident)):
        return prefix, True
    return pid_namespace_prefix(), False


@functools.cache
def pid_namespace_prefix() -> tuple[str, ...]:
    """argv prefix that makes what follows pid 1 of a new pid namespace which dies with
    unshare (see the module docstring); empty when util-linux unshare cannot do it here.
    Run as the sandbox identity, it needs a user namespace of its own to make one."""
    path = binaries.find("unshare")
    if path is None:
        return ()
    return _probed((path, "--user", "--map-current-user", "--pid", "--kill-child=SIGKILL", "--"))


def root_pid_namespace_prefix(ident: identity.Identity) -> tuple[str, ...]:
    """The same pid namespace made by a root spawner, which needs no user namespace for it
    (one namespace and its uid map less per start, ~15% of a sandboxed `true`): unshare
    makes it, then in its child drops to `ident` (gid, no supplementary groups, uid)
    before exec'ing on, so setpriv only arms the death signal; an identity with
    supplementary groups (unshare's --setgid clears them) is dropped to by a setpriv that
    unshare's child execs. Empty when this unshare cannot (util-linux < 2.38 has no
    --setuid): the caller uses pid_namespace_prefix."""
    path = binaries.find("unshare")
    if path is None or os.geteuid() != 0 or not ident.switch:
        return ()
    base = (path, "--pid", "--kill-child=SIGKILL")
    ids = (f"--setgid={ident.gid}", f"--setuid={ident.uid}")
    # Probed once per uid (each session has a group of its own: a probe per group would
    # cost every new session a start, and keep one cache entry per session for good).
    if ident.uid not in _root_unshare_works:
        _root_unshare_works[ident.uid] = bool(_probed((*base, *ids, "--"), ident.uid))
    if not _root_unshare_works[ident.uid]:
        return ()
    if ident.groups:
        setpriv = binaries.find("setpriv")
        if setpriv is None:
            return ()
        drop = (f"--regid={ident.gid}", f"--reuid={ident.uid}", identity.groups_option(ident))
        return (*base, "--", setpriv, *drop, "--")
    return (*base, *ids, "--")


# uid -> whether a root unshare can make the pid namespace and drop to it.
_root_unshare_works: dict[int, bool] = {}


def _probed(prefix: tuple[str, ...], uid: int | None = None) -> tuple[str, ...]:
    """`prefix` if it runs a command here (as `uid`, when given), else ()."""
    try:
        out = subprocess.run(
            [*prefix, "/usr/bin/id", "-u"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if out.returncode != 0 or (uid is not None and out.stdout.strip() != str(uid)):
        return ()
    return prefix


def _probe(bwrap_path: str, ident: identity.Identity) -> str | None:
    """Why bwrap cannot build a sandbox as `ident` here, or None if it can (once per uid:
    the group, each session's own, does not change whether bwrap works).

    Without this a broken sandbox would look like a command that exited 1.
    """
    key = (bwrap_path, ident.uid, ident.switch)
    if key not in _probed_bwrap:
        _probed_bwrap[key] = _probe_bwrap(bwrap_path, ident)
    return _probed_bwrap[key]


_probed_bwrap: dict[tuple[str, int, bool], str | None] = {}


def _probe_bwrap(bwrap_path: str, ident: identity.Identity) -> str | None:
    argv = [bwrap_path, "--unshare-user", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/"]
    try:
        out = subprocess.run(
            [*argv, "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
            env={},
            **identity.popen_kwargs(ident),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run bwrap: {exc}"
    if out.returncode == 0:
        return None
    return (
        f"bwrap cannot create a sandbox as uid {ident.uid}: {out.stderr.strip()}. "
        "Unprivileged user namespaces must be enabled (sysctl user.max_user_namespaces > 0, "
        "kernel.unprivileged_userns_clone=1 where it exists, no AppArmor userns restriction)."
    )


# The variable that carries a shell command into the sandbox (see shell_argv).
COMMAND_VARIABLE = "AGENTD_COMMAND"


def shell_argv(policy: SandboxPolicy, command: str, shell: str = "/bin/bash") -> list[str]:
    """argv that runs `command` with `shell -c` semantics, without the text on any
    command line: it goes in through the environment (bwrap reads that from its --args
    memfd, and /proc/PID/environ is private to the uid), and the shell unsets the
    variable before running it. Adds the variable to `policy.env`.
    """
    policy.env = {**policy.env, COMMAND_VARIABLE: command}
    return [shell, "-c", f'eval "unset {COMMAND_VARIABLE}; ${COMMAND_VARIABLE}"']


def exit_code(returncode: int) -> int:
    """Shell convention: a death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class SandboxProcess:
    """A running sandbox: its pid, its output streams, wait, kill; the wall limit kills it
    on a timer, whether or not anyone is waiting."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        wall_seconds: float | None,
        streams: tuple[asyncio.StreamReader | None, asyncio.StreamReader | None] = (None, None),
        lifeline: io.FileIO | None = None,
    ) -> None:
        self._proc = proc
        self._lifeline = lifeline
        self._stdout, self._stderr = streams
        self.timed_out = False
        self._timer: asyncio.TimerHandle | None = None
        if wall_seconds is not None:
            self._timer = asyncio.get_running_loop().call_later(wall_seconds, self._expire)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self._stdout or self._proc.stdout

    @property
    def stderr(self) -> asyncio.StreamReader | None:
        return self._stderr or self._proc.stderr

    @property
    def returncode(self) -> int | None:
        rc = self._proc.returncode
        return None if rc is None else exit_code(rc)

    async def wait(self) -> int:
        """Wait for the end; the exit code (128+N for a death by signal N)."""
        try:
            return exit_code(await self._proc.wait())
        finally:
            if self._timer is not None:
                self._timer.cancel()
            if self._lifeline is not None:
                self._lifeline.close()

    def kill(self) -> None:
        """End the whole sandbox at once.

        SIGKILL the sandbox's pid-namespace init (bwrap's child) first: its death takes
        every process of the namespace with it. Killing only the outer bwrap relies on
        the init's parent-death signal, which it may not have armed yet when the kill
        comes right after the start.
        """
        if self._proc.returncode is not None:
            return
        for pid in (*_children(self._proc.pid), self._proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _expire(self) -> None:
        if self._proc.returncode is None:
            self.timed_out = True
            self.kill()


def _children(pid: int) -> list[int]:
    """The direct children of `pid` (the namespace init, for an outer bwrap)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


async def spawn(
    policy: SandboxPolicy,
    argv: list[str],
    *,
    stdout: int | None = asyncio.subprocess.PIPE,
    stderr: int | None = asyncio.subprocess.PIPE,
    pass_fds: tuple[int, ...] = (),
) -> SandboxProcess:
    """Start `argv` in the sandbox on the running loop; stdin is /dev/null.

    Output pipes belong to the sandbox identity, so `> /dev/stdout` (a reopen through
    /proc/self/fd/1) works inside; the daemon's open read end is unaffected.
    """
    launch = prepare(policy, argv, pass_fds)
    ident = launch.ident
    ours: list[int] = []  # write ends we made, closed once the child has them
    readers: list[int | None] = [None, None]
    targets: list[int | None] = [stdout, stderr]
    try:
        for i, target in enumerate(targets):
            if target == asyncio.subprocess.PIPE:
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                readers[i] = read_end
                ours.append(write_end)
                target = targets[i] = write_end
            if isinstance(target, int) and target >= 0:
                _give_pipe(target, ident)
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=targets[0],
            stderr=targets[1],
            **launch.popen_kwargs,
        )
    except OSError as exc:
        for fd in readers:
            if fd is not None:
                os.close(fd)
        if launch.lifeline is not None:
            launch.lifeline.close()
        raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
    finally:
        launch.close()
        for fd in ours:
            os.close(fd)
    streams = [await _reader(fd) if fd is not None else None for fd in readers]
    streams_pair = (streams[0], streams[1])
    return SandboxProcess(proc, policy.limits.wall_seconds, streams_pair, launch.lifeline)


def _give_pipe(fd: int, ident: identity.Identity | None) -> None:
    """Make a pipe the sandbox writes to its identity's, so it can reopen it by path.

    Only pipes: a file or a terminal handed in keeps its owner.
    """
    if ident is None or not ident.switch:
        return
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.fchown(fd, ident.uid, ident.gid)


async def _reader(fd: int) -> asyncio.StreamReader:
    """An asyncio stream on the read end of a pipe (what PIPE would have given)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
    )
    return reader


def run(
    policy: SandboxPolicy,
    argv: list[str],
    *,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> int:
    """Run `argv` in the sandbox to completion (wall limit included); the exit code.

    Standard streams are inherited unless given. The sandbox dies with the calling
    thread (--die-with-parent), so call this from a thread that outlives it.
    """
    launch = prepare(policy, argv)
    try:
        for target in (stdout, stderr):
            if isinstance(target, int) and target >= 0:
                _give_pipe(target, launch.ident)
        proc = subprocess.Popen(
            launch.argv, stdin=stdin, stdout=stdout, stderr=stderr, **launch.popen_kwargs
        )
    except OSError as exc:
        if launch.lifeline is not None:
            launch.lifeline.close()
        raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
    finally:
        launch.close()
    try:
        return exit_code(proc.wait(timeout=policy.limits.wall_seconds))
    except subprocess.TimeoutExpired:
        proc.kill()
        return exit_code(proc.wait())
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        if launch.lifeline is not None:
            launch.lifeline.close()
