"""ripgrep for Glob and Grep: the search root a session names, and rg run with a bound.

rg runs as a child process (never through a shell) in the directory searched, so the
globs a model writes match paths relative to that directory, as the reference does.
Its stdout is read up to a bound, then rg is killed; a cancelled call kills it too.

rg walks the tree by name: a directory swapped for a symlink between its listing and
the open of a child is followed. So for a session rg runs inside that session's
sandbox, as its identity, seeing nothing writable, no network, and of the host only
what the session's own commands see (the workspace, granted paths, read-only); a
swap can then lead it nowhere the session could not read anyway. The price: one
sandbox start (~10 ms idle) and the seccomp filter on each of rg's system calls;
Grep on a 100 000-file tree measured 1.02-1.18x rg run directly (bench/search.py).
Running rg only as the session's uid (setpriv, ~2 ms) would be cheaper but would
still follow a swap to anything that uid can read, the secrets the sandbox hides
included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd.foundation.errors import InputError, ToolError
from agentd.fs import access as fsaccess
from agentd.fs import identity as fsidentity
from agentd.runs import launch
from agentd_sandbox import PathGone, SandboxPolicy, SandboxUnavailable, binaries, spawn

if TYPE_CHECKING:
    from agentd.tools.base import ToolContext

# From fixed system directories, as bwrap is (agentd_sandbox/binaries.py): an rg found on the
# daemon's PATH may be one the sandbox cannot see, or anyone's.
RG_BIN = binaries.find("rg", "/usr/bin:/usr/local/bin:/bin") or "/usr/bin/rg"
# Enough for any listing a model can use; keeps the daemon's memory flat whatever rg finds.
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
# Version-control metadata is never worth a search result.
VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
BASE_ARGS = ("--no-config", "--color", "never", "--hidden")
COMMON_ARGS = BASE_ARGS + tuple(arg for name in VCS_DIRS for arg in ("--glob", f"!{name}"))


@dataclass(frozen=True, slots=True)
class SearchRoot:
    path: str  # absolute, lexical (as the session names it)
    is_dir: bool
    loc: fsaccess.Located
    # The sandbox rg runs in; None for the daemon's own state dir (saved results).
    sandbox: SandboxPolicy | None = None


def search_root(raw: str | None, ctx: ToolContext) -> SearchRoot:
    """The existing file or directory `raw` names, checked (as the session's identity) to
    lie inside the roots the call may read."""
    session = ctx.session
    path = fsaccess.expand(raw, session.cwd, session.home) if raw else session.cwd
    loc = fsaccess.locate(path, ctx.roots("read"), ctx.fs_identity(), daemon_roots=(ctx.state_dir,))
    fsaccess.check_inside(loc)  # a symlink leaving the workspace is refused here
    try:
        st = fsaccess.stat_beneath(loc)
    except (FileNotFoundError, NotADirectoryError):
        # Not a <tool_use_error>: the reference finds this out when it runs the search.
        raise ToolError(
            f"Path {path} does not exist. The current working directory is {session.cwd}."
        ) from None
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
        # rg would read a FIFO until its writer closes it (the search's whole time limit).
        raise ToolError(
            f"{path} is not a regular file or a directory (a device, FIFO or socket) and is "
            "never searched: its content may be endless or block."
        )
    return SearchRoot(path, stat.S_ISDIR(st.st_mode), loc, _sandbox_for(ctx, loc))


def _sandbox_for(ctx: ToolContext, loc: fsaccess.Located) -> SandboxPolicy | None:
    """The session's sandbox narrowed for a search: everything it may read shown
    read-only where it is, nothing writable, no network, none of the session's env."""
    if os.path.normpath(loc.root) == os.path.normpath(ctx.state_dir):
        return None
    readable = [r for r in ctx.roots("read") if r != ctx.state_dir]
    return launch.search_policy(ctx.session, ctx.services.config, ctx.services.sandbox, readable)


def identity_of(root: SearchRoot) -> fsidentity.FsIdentity | None:
    """Whose rights the stats of rg's results are made with."""
    return root.loc.identity


@dataclass(frozen=True, slots=True)
class RgOutput:
    stdout: bytes
    stderr: str
    returncode: int
    # stdout went over the bound, or the time limit passed, and rg was stopped: the
    # results are incomplete.
    truncated: bool
    timed_out: bool = False
    # The launcher found a path its sandbox names gone before it started: rg never ran.
    never_started: bool = False


# Longest a search may run before it is stopped with what it found so far.
MAX_SECONDS = 60.0


async def run_rg(
    args: list[str],
    cwd: str,
    cancelled: asyncio.Event,
    max_bytes: int = MAX_OUTPUT_BYTES,
    max_seconds: float | None = None,
    sandbox: SandboxPolicy | None = None,
    vcs: bool = False,
) -> RgOutput:
    """Run `rg COMMON_ARGS args` in `cwd` (inside `sandbox` when given); kill it on
    cancellation, past `max_bytes`, or after `max_seconds` (a search of / can take as
    long as the disk is big). With `vcs`, version-control dirs are walked too (Glob
    lists them, as the reference does)."""
    common = BASE_ARGS if vcs else COMMON_ARGS
    if any("\0" in arg for arg in args):
        raise InputError(
            "The pattern, glob or type contains a NUL byte, which ripgrep cannot take."
        )
    argv = [*common, *args]
    if sandbox is None:
        return await _run_once(argv, cwd, cancelled, max_bytes, max_seconds, None)

    async def attempt() -> tuple[RgOutput, bool]:
        # bwrap's argv is built anew each time: a host socket or listed path may have
        # vanished since. Nothing ran, and a search changes nothing: safe to start again.
        plan = launch.plan_search(sandbox, cwd, [RG_BIN, *argv])
        try:
            out = await _run_once(argv, cwd, cancelled, max_bytes, max_seconds, plan)
        except PathGone as exc:
            return RgOutput(b"", str(exc), 1, False, never_started=True), False
        return out, not _never_started(out)

    return await launch.start(attempt, "a search")


def _never_started(out: RgOutput) -> bool:
    """bwrap failed while setting up (its own message, exit 1): rg never ran. rg's own
    messages start with "rg:", so no file name or match can pose as this."""
    return out.returncode == 1 and not out.stdout and out.stderr.startswith("bwrap: ")


async def _run_once(
    argv: list[str],
    cwd: str,
    cancelled: asyncio.Event,
    max_bytes: int,
    max_seconds: float | None,
    plan: launch.LaunchPlan | None,
) -> RgOutput:
    """rg run once: as `plan` says, else as the daemon (its own state dir only)."""
    proc: Any
    if plan is not None:
        try:
            proc = await spawn(plan.policy, plan.argv)
        except PathGone:
            raise  # planned again (attempt)
        except SandboxUnavailable as exc:
            raise ToolError(
                f"The sandbox the search runs in could not start, so nothing was searched: {exc}"
            ) from None
    else:
        proc = await asyncio.create_subprocess_exec(
            RG_BIN,
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if not k.startswith("RIPGREP_")},
        )
    assert proc.stdout is not None and proc.stderr is not None
    chunks: list[bytes] = []
    size = 0
    truncated = False

    async def read_stdout() -> None:
        nonlocal size, truncated
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            take = chunk[: max_bytes - size]
            chunks.append(take)
            size += len(take)
            if size >= max_bytes:
                truncated = True
                _kill(proc)
                return

    async def read_stderr() -> bytes:
        assert proc.stderr is not None
        data = b""
        # Keep the first 64 KiB, drain the rest so rg never blocks on a full pipe.
        while chunk := await proc.stderr.read(1 << 16):
            data += chunk[: max(0, 65536 - len(data))]
        return data

    work = asyncio.gather(read_stdout(), read_stderr(), proc.wait())
    stop = asyncio.ensure_future(cancelled.wait())
    timed_out = False
    try:
        waiting: set[asyncio.Future[Any]] = {work, stop}
        done, _ = await asyncio.wait(
            waiting,
            timeout=MAX_SECONDS if max_seconds is None else max_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if stop in done:
            _kill(proc)
            with contextlib.suppress(Exception):
                await work
            raise ToolError("The search was cancelled.")
        if not done:
            timed_out = truncated = True
            _kill(proc)
            await work
    except BaseException:
        _kill(proc)
        work.cancel()
        with contextlib.suppress(BaseException):
            await proc.wait()
        raise
    finally:
        stop.cancel()
    _, err, returncode = work.result()
    if truncated:
        # rg was killed on purpose; whatever it had printed is a valid prefix.
        returncode = 0
        # Drop the last, possibly partial, record.
        data = b"".join(chunks)
        cut = max(data.rfind(b"\n"), data.rfind(b"\0"))
        return RgOutput(data[: cut + 1], err.decode(errors="replace"), returncode, True, timed_out)
    return RgOutput(b"".join(chunks), err.decode(errors="replace"), returncode, False)


def _kill(proc: Any) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def check_rg_failed(out: RgOutput) -> None:
    """rg exits 2 both for a bad pattern/glob/type (nothing searched) and for unreadable
    files among results; only the first, with nothing found, is a failed call."""
    if out.truncated and not out.never_started:
        return  # stopped on purpose (its bound, its time limit), bwrap too if not yet rg
    if out.never_started or (out.stderr.startswith("bwrap:") and not out.stdout):
        # The sandbox failed before rg ran (bwrap exits 1, which rg uses for "no match").
        raise ToolError(f"The search's sandbox failed, so nothing was searched: {out.stderr}")
    if out.returncode == 2 and out.stderr.startswith("No files were searched"):
        return  # every file was filtered out (glob, type): an empty result, not a failure
    if out.returncode == 2 and not out.stdout:
        message = out.stderr.strip() or "rg exited with status 2"
        raise ToolError(f"ripgrep refused the search and searched nothing:\n{message}")
    if out.returncode not in (0, 1, 2):
        raise ToolError(f"ripgrep failed (exit status {out.returncode}): {out.stderr.strip()}")


def display(path_in_root: str, root_dir: str, cwd: str) -> str:
    """A path rg printed (relative to the dir it ran in) as the session's listings show it."""
    return fsaccess.display_path(os.path.normpath(os.path.join(root_dir, path_in_root)), cwd)
