"""Start a command in the sandbox: the API the daemon uses (`spawn`) and the CLI's (`run`).

The child drops to the sandbox identity (subprocess does it in C between fork and
exec), execs `prlimit` to set rlimits, which execs bwrap with the seccomp program on
the only extra fd. Killing bwrap kills the sandbox's pid-namespace init (bwrap sets
PDEATHSIG on it), and the kernel then kills everything left in the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

from . import bwrap, identity, limits, seccomp
from .errors import SandboxUnavailable
from .policy import SandboxPolicy


@dataclass
class Launch:
    """Everything needed to exec one sandboxed command."""

    argv: list[str]
    seccomp_fd: int
    popen_kwargs: dict[str, Any]

    def close(self) -> None:
        """Close the parent's copy of the seccomp fd (the child has its own)."""
        os.close(self.seccomp_fd)


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
    try:
        fd = seccomp.bpf_fd()
    except (seccomp.FilterError, OSError) as exc:
        raise SandboxUnavailable(f"cannot build the seccomp filter: {exc}") from exc
    try:
        argv = bwrap.build_argv(policy, command, identity=ident, bwrap=bwrap_path, seccomp_fd=fd)
    except BaseException:
        os.close(fd)
        raise
    kwargs: dict[str, Any] = {
        "close_fds": True,
        "pass_fds": (fd, *pass_fds),
        "start_new_session": True,
        "env": {},
    }
    drop = identity.setpriv_prefix(ident)
    if not drop:
        kwargs.update(identity.popen_kwargs(ident))
    prefix = limits.prlimit_prefix(policy.limits)
    if not prefix:
        lim = policy.limits
        kwargs["preexec_fn"] = lambda: limits.apply_in_child(lim)
    return Launch([*drop, *prefix, *argv], fd, kwargs)


@functools.cache
def _probe(bwrap_path: str, ident: identity.Identity) -> str | None:
    """Why bwrap cannot build a sandbox as `ident` here, or None if it can (once per uid).

    Without this a broken sandbox would look like a command that exited 1.
    """
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


def exit_code(returncode: int) -> int:
    """Shell convention: a death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class SandboxProcess:
    """A running sandbox: its pid, its output streams, wait, kill; the wall limit kills it
    on a timer, whether or not anyone is waiting."""

    def __init__(self, proc: asyncio.subprocess.Process, wall_seconds: float | None) -> None:
        self._proc = proc
        self.timed_out = False
        self._timer: asyncio.TimerHandle | None = None
        if wall_seconds is not None:
            self._timer = asyncio.get_running_loop().call_later(wall_seconds, self._expire)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self._proc.stdout

    @property
    def stderr(self) -> asyncio.StreamReader | None:
        return self._proc.stderr

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
    """Start `argv` in the sandbox on the running loop; stdin is /dev/null."""
    launch = prepare(policy, argv, pass_fds)
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            **launch.popen_kwargs,
        )
    except OSError as exc:
        raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
    finally:
        launch.close()
    return SandboxProcess(proc, policy.limits.wall_seconds)


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
        proc = subprocess.Popen(
            launch.argv, stdin=stdin, stdout=stdout, stderr=stderr, **launch.popen_kwargs
        )
    except OSError as exc:
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
