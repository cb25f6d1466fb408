"""What a Bash command needs when it runs only because the classifier called it read-only.

Such a command runs with every workspace root read-only and no network (the session's
temp dir stays writable), so a wrong verdict can read but never write. Two more things
make that hold, and keep read-only programs quiet:

- The environment tells git not to take optional locks or write the index
  (GIT_OPTIONAL_LOCKS=0), not to page, not to prompt, and to read no global config (the
  sandbox's HOME is the session's writable temp dir, so a `.gitconfig` there is the
  sandbox's own writing).
- Each repository's config is shown through a copy holding only inert keys
  (agentd.sandboxing.gitconfig), bound read-only over the real file: `core.fsmonitor`, pagers,
  external diffs, textconv, filters, aliases, hooks and includes of the workspace never
  run. The repositories found are those of the cwd and its parents (up to /), of the
  directories the command changes to, of each workspace root, and those a bounded scan
  of each root finds (submodules and nested clones); the `-c` overrides below cover the
  best-known keys in any repository the scan missed.

The daemon reads each config as hostile input: the real path is walked from / without
following a link, opened non-blocking, checked to be a regular file the sandbox identity
may read, and size-capped. Any config it cannot read that way is replaced by an empty one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import re
import secrets
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentd.fs.identity import FsIdentity, acting_as
from agentd.network.env import add_git_config
from agentd.sandboxing import gitconfig
from agentd.sandboxing import policy as sandbox_policy
from agentd_sandbox import hides

if TYPE_CHECKING:
    from agentd.foundation.config import Config
    from agentd.sessions.session import Session
    from agentd_sandbox import SandboxPolicy

# Environment of a read-only run.
ENV: dict[str, str] = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_EDITOR": "true",
}
# Overrides git takes over any repository config (a repository the scan did not find).
GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),
)
# The bounded scan of a workspace root for nested repositories.
SCAN_DEPTH = 3
SCAN_MAX_DIRS = 400
_SCAN_SKIP = frozenset({"node_modules", ".git", ".venv", "venv", "target", "__pycache__"})
_READ_CAP = gitconfig.MAX_BYTES + 1

# The message a failed write shows in a read-only run.
EROFS_TEXT = "Read-only file system"


async def enforce(
    policy: SandboxPolicy,
    session: Session,
    config: Config,
    command: str,
    staging: StagingDir,
    *,
    read_only: bool = True,
) -> Staged:
    """Finish a read-only policy (from `sandbox_policy.policy_for(..., read_only=True)`) for
    `command`: the environment and the sanitised git configs. With `read_only` False,
    only neutralise git (a read-only command an allow rule lets run). Clean up the
    returned Staged once the command has ended."""
    policy.env = environment(policy.env)
    # The home later runs with write access obey is read-only; caches go to the temp dir.
    if policy.home and read_only:
        policy.read_only = [*policy.read_only, policy.home]
        policy.env.setdefault(
            "XDG_CACHE_HOME", os.path.join(policy.env.get("TMPDIR", "/tmp"), ".cache")
        )
    staged = await asyncio.to_thread(
        stage_git_configs,
        staging,
        list(session.workspace_roots),
        session.cwd,
        static_dirs(command, session.cwd),
        sandbox_policy.run_as(session, config),
        hides(policy),
    )
    policy.ro_binds = [*policy.ro_binds, *staged.ro_binds]
    return staged


def static_dirs(command: str, cwd: str) -> list[str]:
    """Directories the command changes to (`cd X`, `git -C X`), where known statically."""
    from agentd.bashsec import classify

    dirs: list[str] = []
    cls = classify(command)
    for target in cls.cd_targets:
        dirs.append(os.path.normpath(os.path.join(cwd, target)))
    for cmd in cls.commands:
        argv = cmd.argv
        if cmd.program != "git":
            continue
        for word, following in itertools.pairwise(argv):
            if word == "-C" and isinstance(following, str):
                dirs.append(os.path.normpath(os.path.join(cwd, following)))
    return [d for d in dirs if os.path.isdir(d)]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (the policy's, which wins for ENV's keys) with the git overrides appended
    after any git settings it already has (the proxy's): appended last, they win."""
    out = {**ENV, **(env or {})}
    add_git_config(out, list(GIT_OVERRIDES))
    return out


@dataclass(frozen=True)
class Identity:
    """Who the sandbox runs as: the daemon reads nothing that identity could not."""

    uid: int
    gid: int

    @classmethod
    def of(cls, ident: tuple[int, int] | None) -> Identity:
        return cls(*ident) if ident else cls(os.geteuid(), os.getegid())

    def may(self, st: os.stat_result, bits: tuple[int, int, int]) -> bool:
        if self.uid == 0:
            return True
        if st.st_uid == self.uid:
            return bool(st.st_mode & bits[0])
        if st.st_gid == self.gid:
            return bool(st.st_mode & bits[1])
        return bool(st.st_mode & bits[2])


_SEARCH = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
_READ = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)


@dataclass
class Staged:
    """The sanitised configs of one run: binds for the policy, files to remove after."""

    ro_binds: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def cleanup(self) -> None:
        for path in self.files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.files.clear()


def stage_git_configs(
    staging: StagingDir,
    roots: list[str],
    cwd: str,
    extra_dirs: list[str],
    ident: tuple[int, int] | None,
    hidden: Callable[[str], bool] = lambda path: False,
) -> Staged:
    """Sanitised copies of every repository config the run may read, ready to bind (the
    copies in `staging`).

    Found as the sandbox identity (links followed as git in the sandbox follows them),
    and only where the sandbox sees: a config in a place it hides (`hidden`: a home, the
    host's /tmp, through a `.git` link or a `commondir`) gets no stand-in, which would
    show what it holds (a remote's URL with its token)."""
    who = Identity.of(ident)
    staged = Staged()
    try:
        with acting_as(FsIdentity(*ident) if ident else None):
            found = find_configs(roots, cwd, extra_dirs)
        for dest in found:
            if hidden(dest):
                continue
            if not _reachable(dest, who):
                continue  # the sandbox could not read it either (and bwrap could not mount)
            data = _read_beneath(dest, who)
            text = gitconfig.sanitize(data) if data is not None else ""
            staged.ro_binds.append((staging.stage(text, who), dest))
            staged.files.append(staged.ro_binds[-1][0])
    except BaseException:
        staged.cleanup()
        raise
    return staged


def find_configs(roots: list[str], cwd: str, extra_dirs: list[str]) -> list[str]:
    """The real paths of the git config files a command run in `cwd` may read."""
    real_roots = [os.path.realpath(r) for r in roots]
    dirs: list[str] = []

    def add(d: str) -> None:
        if d not in dirs:
            dirs.append(d)

    for start in [cwd, *extra_dirs]:
        # git looks for a repository in each parent up to /, the workspace's too (a
        # workspace may be a directory inside a cloned repository).
        d = os.path.realpath(start)
        while True:
            add(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    for root in real_roots:
        add(root)
        for d in _scan(root):
            add(d)
    found: list[str] = []
    for d in dirs:
        for path in _configs_of(d):
            real = os.path.realpath(path)
            if real not in found and os.path.isfile(real):
                found.append(real)
    return found


def _scan(root: str) -> list[str]:
    """Directories under `root` (not `root`) holding a `.git`, breadth first, bounded."""
    found: list[str] = []
    level = [root]
    seen = 0
    for _ in range(SCAN_DEPTH):
        nxt: list[str] = []
        for d in level:
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                if e.name in _SCAN_SKIP or not e.is_dir(follow_symlinks=False):
                    continue
                seen += 1
                if seen > SCAN_MAX_DIRS:
                    return found
                if os.path.lexists(os.path.join(e.path, ".git")):
                    found.append(e.path)
                nxt.append(e.path)
        level = nxt
    return found


def _configs_of(d: str) -> list[str]:
    """The config files of the repository whose work tree (or bare dir) is `d`."""
    dotgit = os.path.join(d, ".git")
    try:
        st = os.stat(dotgit)
    except OSError:
        return []
    if stat.S_ISDIR(st.st_mode):
        gitdir = os.path.realpath(dotgit)
    elif stat.S_ISREG(st.st_mode):
        target = _gitdir_of_file(dotgit)
        if target is None:
            return []
        gitdir = os.path.realpath(os.path.join(d, target))
    else:
        return []
    return _configs_of_gitdir(gitdir, depth=0)


def _configs_of_gitdir(gitdir: str, depth: int) -> list[str]:
    paths = [os.path.join(gitdir, "config"), os.path.join(gitdir, "config.worktree")]
    common = _small_text(os.path.join(gitdir, "commondir"))
    if common:
        common_dir = os.path.realpath(os.path.join(gitdir, common.strip()))
        paths.append(os.path.join(common_dir, "config"))
    if depth < 2:  # submodules' git dirs, and linked worktrees' own configs
        for sub in ("modules", "worktrees"):
            base = os.path.join(gitdir, sub)
            with contextlib.suppress(OSError), os.scandir(base) as it:
                for e in list(it)[:100]:
                    if e.is_dir(follow_symlinks=False):
                        paths += _configs_of_gitdir(e.path, depth + 1)
    return paths


def _gitdir_of_file(path: str) -> str | None:
    text = _small_text(path)
    if text is None or not text.startswith("gitdir:"):
        return None
    value = text[len("gitdir:") :].strip()
    return value or None


def _small_text(path: str) -> str | None:
    """A small regular file's text, read without following a final link or blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").split("\n", 1)[0]


def _reachable(path: str, who: Identity) -> bool:
    parent = os.path.dirname(path)
    while True:
        try:
            st = os.stat(parent)
        except OSError:
            return False
        if not who.may(st, _SEARCH):
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def _read_beneath(real: str, who: Identity) -> bytes | None:
    """The file at `real` (a path without links), walked from / without following one."""
    parts = [p for p in real.split("/") if p]
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open("/", flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(parts[-1], flags | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=fd)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    try:
        st = os.fstat(leaf)
        if not stat.S_ISREG(st.st_mode) or not who.may(st, _READ):
            return None
        chunks: list[bytes] = []
        total = 0
        while total < _READ_CAP and (chunk := os.read(leaf, _READ_CAP - total)):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(leaf)


class StagingDir:
    """The daemon's own directory for sanitised copies: only it writes there; the sandbox
    identity may pass through (bwrap, running as that identity, opens the copies). One
    per daemon, made by its assembly; made on first use, removed at close (or exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None

    def path(self) -> str:
        with self._lock:
            if self._path is None or not os.path.isdir(self._path):
                self._path = tempfile.mkdtemp(prefix="agentd-ro-")
                os.chmod(self._path, 0o711)
                atexit.register(_remove_staging, self._path)
            return self._path

    def stage(self, text: str, who: Identity) -> str:
        """A new file holding `text`, readable by `who`'s group only (and root)."""
        path = os.path.join(self.path(), secrets.token_hex(16))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
        try:
            os.write(fd, text.encode())
            if os.geteuid() == 0 and who.uid != 0:
                os.fchown(fd, 0, who.gid)
                os.fchmod(fd, 0o440)
        finally:
            os.close(fd)
        return path

    def close(self) -> None:
        with self._lock:
            if self._path is not None:
                _remove_staging(self._path)
                self._path = None


def _remove_staging(path: str) -> None:
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)


def tried_to_write(output: str) -> str | None:
    """What a failed read-only run tried to write, from its error output: the path the
    error names, "" if it names none, None if no write was refused."""
    for line in output.splitlines():
        if EROFS_TEXT not in line:
            continue
        head = line.split(EROFS_TEXT, 1)[0].rstrip()
        head = head[:-1].rstrip() if head.endswith(":") else head
        if head[-1:] in ("'", '"', "’", "`"):
            close = head[-1]
            opener = {"’": "‘", "`": "`"}.get(close, close)
            start = head.rfind(opener, 0, len(head) - 1)
            return head[start + 1 : -1] if start >= 0 else ""
        if quoted := re.findall(r"['\"‘`]([^'\"’`]+)['\"’`]", head):
            return quoted[-1]
        segment = head.rsplit(": ", 1)[-1].strip()
        return "" if not segment or any(c.isspace() for c in segment) else segment
    return None


def erofs_note(output: str) -> str | None:
    """The sentence for a read-only run that failed by trying to write, or None."""
    what = tried_to_write(output)
    if what is None:
        return None
    target = f" `{what}`" if what else ""
    return (
        "This command ran read-only because it was classified read-only, and it tried to "
        f"write{target}: ask the user to run it with write access (or to allow it with a "
        "rule) instead of retrying it."
    )
