"""A Bash command outside the sandbox: what `dangerouslyDisableSandbox` runs, once a person
approved that exact call in a session whose policy allows unsandboxed commands.

It still runs as the session's sandbox identity (never as root: a root daemon with no
other identity refuses), with the sandbox's environment, in its own process group, in
the session's control group, with the same rlimits; what it loses is the mount, pid and
network isolation and seccomp.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from agentd_sandbox import SandboxPolicy, SandboxUnavailable, binaries
from agentd_sandbox.bwrap import environment
from agentd_sandbox.cgroups import join_prefix
from agentd_sandbox.limits import prlimit_prefix


class HostProcess:
    """The SandboxProcess face (pid, wait, kill) for a process group on the host."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        rc = self._proc.returncode
        return None if rc is None else (128 - rc if rc < 0 else rc)

    async def wait(self) -> int:
        rc = await self._proc.wait()
        return 128 - rc if rc < 0 else rc

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)


async def spawn(
    policy: SandboxPolicy,
    argv: list[str],
    *,
    stdout: int | None = None,
    stderr: int | None = None,
    pass_fds: tuple[int, ...] = (),
) -> HostProcess:
    uid = policy.uid if policy.uid is not None else os.geteuid()
    gid = policy.gid if policy.gid is not None else os.getegid()
    if uid == 0 or gid == 0:
        raise SandboxUnavailable("refusing to run a command outside the sandbox as root")
    kwargs: dict[str, Any] = {}
    drop: list[str] = []
    if os.geteuid() != uid:
        if os.geteuid() != 0:
            raise SandboxUnavailable(f"cannot run as uid {uid}: the daemon is not root")
        kwargs = {"user": uid, "group": gid, "extra_groups": []}
        setpriv = binaries.find("setpriv")
        if policy.cgroup_procs:
            # The session's group is joined as root, so the drop must come after it.
            if setpriv is None:
                raise SandboxUnavailable("setpriv (util-linux) is needed: install util-linux")
            drop = [setpriv, f"--regid={gid}", f"--reuid={uid}", "--clear-groups", "--"]
            kwargs = {}
    try:
        proc = await asyncio.create_subprocess_exec(
            *join_prefix(policy.cgroup_procs),
            *drop,
            *prlimit_prefix(policy.limits),
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=policy.cwd,
            env=environment(policy),
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
            **kwargs,
        )
    except OSError as exc:
        raise SandboxUnavailable(f"cannot start the command: {exc}") from exc
    return HostProcess(proc)
