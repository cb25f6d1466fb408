"""What the daemon hands a Bash call besides its argv, and what comes back: the BASH_ENV
script and the pipe it reports into, both made by the daemon and passed as descriptors.

Nothing here is a path a sandboxed command could replace: the script is a sealed,
read-only memfd; bash writes a line into the pipe as soon as it runs (so the daemon knows
the sandbox started) and the final cwd at exit. What comes back is read without
blocking, capped, and a cwd is trusted only once resolved inside a workspace root.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from typing import Any

# Sourced by bash before the command (BASH_ENV): reports the final cwd on exit into a
# pipe the daemon made, and removes itself from the environment so nested shells do
# not run it. The script is a sealed memfd: nothing in the sandbox can rewrite it.
# The empty line first says bash is running (the sandbox started); the trap reports
# the final cwd.
_BASH_ENV = (
    "unset BASH_ENV\nbuiltin echo >&{cwd_fd}\ntrap 'builtin pwd -P >&{cwd_fd} 2>/dev/null' EXIT\n"
)
# The most of a cwd report the daemon reads: a path and its newline.
_MAX_CWD_REPORT = 4096 + 1


class Channels:
    """What the daemon hands a Bash call besides its argv, all made by the daemon and
    passed as descriptors, none a path a sandboxed command could replace: the BASH_ENV
    script (a sealed memfd, read-only) and the pipe its EXIT trap reports the cwd into.
    """

    def __init__(self, script_fd: int, cwd_read: int, cwd_write: int) -> None:
        self.script_fd = script_fd
        self.cwd_read = cwd_read
        self.cwd_write = cwd_write
        self._seen = b""  # read from the pipe so far

    async def wait_started(self, ended: asyncio.Future[Any]) -> bool:
        """Whether bash ran the BASH_ENV script (it writes first); False when the sandbox
        ended, or closed the pipe, before that."""
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(self.cwd_read, wake)
        try:
            await asyncio.wait({readable, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(self.cwd_read)
        self._seen += self._drain()
        return bool(self._seen)

    def _drain(self) -> bytes:
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while len(self._seen) + len(data) < 4 * _MAX_CWD_REPORT:
                chunk = os.read(self.cwd_read, _MAX_CWD_REPORT)
                if not chunk:
                    break
                data += chunk
        return data

    @classmethod
    def open(cls) -> Channels:
        cwd_read, cwd_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        # The trap writes at most a path; a full pipe must block only the command.
        os.set_blocking(cwd_write, True)
        memfd = os.memfd_create("agentd-bash-env", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.write(memfd, _BASH_ENV.format(cwd_fd=cwd_write).encode())
            seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
            fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, seals | fcntl.F_SEAL_WRITE)
            script_fd = os.open(f"/proc/self/fd/{memfd}", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            for fd in (cwd_read, cwd_write):
                os.close(fd)
            raise
        finally:
            os.close(memfd)
        return cls(script_fd, cwd_read, cwd_write)

    @property
    def bash_env(self) -> str:
        return f"/proc/self/fd/{self.script_fd}"

    @property
    def pass_fds(self) -> tuple[int, int]:
        return (self.script_fd, self.cwd_write)

    def started(self) -> None:
        """The sandbox has its copies: drop ours of what only it uses."""
        for name in ("script_fd", "cwd_write"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    def reported_cwd(self) -> str | None:
        """The last line the trap wrote, if any: read without waiting (a background
        child may hold the pipe open), at most _MAX_CWD_REPORT bytes."""
        if self.cwd_read < 0:
            return None
        self._seen += self._drain()
        lines = [line for line in self._seen.split(b"\n") if line]
        if not lines or len(lines[-1]) >= _MAX_CWD_REPORT:
            return None
        try:
            return os.fsdecode(lines[-1])
        except UnicodeDecodeError:
            return None

    def close(self) -> None:
        self.started()
        if self.cwd_read >= 0:
            os.close(self.cwd_read)
            self.cwd_read = -1


def contained_cwd(raw: str, roots: list[str]) -> str | None:
    """`raw` made absolute and real, if it is an existing directory inside one of `roots`.

    A report comes from the sandbox: `/ws/../elsewhere` or a symlink out must not move
    the session there; the check is on the resolved path, not the text.
    """
    if not os.path.isabs(raw) or "\0" in raw:
        return None
    real = os.path.realpath(raw)
    for root in roots:
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip("/") + "/"):
            return real if os.path.isdir(real) else None
    return None
