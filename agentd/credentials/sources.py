"""A secret, fetched from its source when a route needs it: a file, a variable of the
daemon's environment, or the owner's own `git credential fill`.

`git credential fill` runs as the configured user with an environment of our making:
no system config, the user's own HOME (which no sandbox can write), an empty working
directory under the daemon's state with git's search stopped there, so no workspace's
`.git/config` (a hostile `credential.helper` or `core.askPass`) is ever read, no
prompts, and only the host this source is configured for is asked about.
"""

from __future__ import annotations

import base64
import os
import pwd
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentd.credentials.config import Route, Source

# How long a fetched secret is reused: a git clone makes several requests in a row.
CACHE_SECONDS = 60.0
FILL_SECONDS = 20.0
MAX_SECRET_BYTES = 16 * 1024


class SourceError(Exception):
    """The secret could not be had; the message says what to fix (never the secret)."""


@dataclass(frozen=True, slots=True)
class Secret:
    username: str
    password: str

    def header_value(self, route: Route) -> str:
        if route.scheme == "Basic":
            user = route.username or self.username or "x-access-token"
            pair = base64.b64encode(f"{user}:{self.password}".encode()).decode()
            return f"Basic {pair}"
        return f"{route.scheme} {self.password}".strip()

    def masks(self, route: Route) -> list[bytes]:
        """Byte strings that must never reach the sandbox, longest first."""
        value = self.header_value(route)
        found = {value.encode(), self.password.encode()}
        if " " in value:
            found.add(value.split(" ", 1)[1].encode())
        return sorted((m for m in found if len(m) >= 4), key=len, reverse=True)


def _check_secret(text: str, where: str) -> str:
    text = text.strip()
    if not text:
        raise SourceError(f"{where} is empty")
    if len(text) > MAX_SECRET_BYTES or any(c in text for c in "\r\n\0"):
        raise SourceError(f"{where} does not hold one line of secret")
    return text


def _from_file(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise SourceError(f"cannot read {path} ({exc.strerror})") from None
    try:
        st = os.fstat(fd)

        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{path} is not a regular file")
        if st.st_mode & 0o077:
            raise SourceError(f"{path} may be read by others: chmod 600 it")
        data = os.read(fd, MAX_SECRET_BYTES + 1)
    finally:
        os.close(fd)
    return _check_secret(data.decode("utf-8", "replace"), path)


def fill_environment(home: str, workdir: str) -> dict[str, str]:
    """The whole environment `git credential fill` gets (none of the daemon's)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(workdir),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "LANG": "C",
    }


def _run_as_owner(
    source: Source, workdir: str, owner_uid: int, argv: list[str], stdin: bytes | None
) -> subprocess.CompletedProcess[bytes]:
    """`argv` run as the configured user (else the session's owner) with an environment
    of our making, in `workdir` (theirs, made if missing), bounded by FILL_SECONDS."""
    try:
        user = pwd.getpwnam(source.user) if source.user else pwd.getpwuid(owner_uid)
    except KeyError:
        who = source.user or f"uid {owner_uid}"
        raise SourceError(f"no user {who} for {source.where}") from None
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    os.chown(workdir, user.pw_uid, user.pw_gid)
    change_user = os.getuid() == 0 and user.pw_uid != 0
    feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    try:
        return subprocess.run(
            argv,
            **feed,
            capture_output=True,
            env=fill_environment(source.home or user.pw_dir, workdir),
            cwd=workdir,
            timeout=FILL_SECONDS,
            user=user.pw_uid if change_user else None,
            group=user.pw_gid if change_user else None,
            extra_groups=[] if change_user else None,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceError(f"{source.where} failed ({type(exc).__name__})") from None


def _git_fill(source: Source, workdir: str, owner_uid: int) -> tuple[str, str]:
    """The configured user's helpers answer, else the session owner's."""
    parts = urlsplit(source.url)
    request = f"protocol=https\nhost={parts.netloc}\n"
    if parts.path.strip("/"):
        request += f"path={parts.path.strip('/')}\n"
    argv = ["git", "-c", "credential.interactive=false", "credential", "fill"]
    done = _run_as_owner(source, workdir, owner_uid, argv, (request + "\n").encode())
    if done.returncode != 0:
        raise SourceError(f"{source.where} found no credential (exit {done.returncode})")
    answer = done.stdout.decode("utf-8", "replace")
    fields = dict(line.split("=", 1) for line in answer.splitlines() if "=" in line and line)
    # An answer for another host than asked is not used (a helper may answer anything).
    if fields.get("host", parts.netloc) != parts.netloc:
        raise SourceError(f"{source.where} answered for another host")
    password = _check_secret(fields.get("password", ""), source.where)
    return fields.get("username", ""), password


def _command(source: Source, workdir: str, owner_uid: int) -> str:
    """The first line the command prints, run as the configured user (else the
    session's owner) with an environment of our making, in an empty directory."""
    done = _run_as_owner(source, workdir, owner_uid, list(source.command), None)
    if done.returncode != 0:
        raise SourceError(f"{source.where} failed (exit {done.returncode})")
    first = done.stdout[: MAX_SECRET_BYTES + 1].decode("utf-8", "replace").strip()
    return _check_secret(first.splitlines()[0] if first else "", source.where)


class Sources:
    """Secrets by source name, each reused for CACHE_SECONDS."""

    def __init__(self, sources: dict[str, Source], state_dir: str) -> None:
        self.sources = sources
        self.workdir = os.path.join(state_dir, "credentials", "fill")
        self._cache: dict[str, tuple[float, Secret]] = {}
        self._lock = threading.Lock()

    def forget(self, name: str) -> None:
        with self._lock:
            for key in [k for k in self._cache if k.split("\0")[0] == name]:
                del self._cache[key]

    def get(self, name: str, owner_uid: int) -> Secret:
        """Blocking (a file read, or a `git credential fill`): call from a thread. A
        `git credential fill` without a configured user is the session owner's own."""
        source = self.sources[name]
        per_owner = source.kind in ("git-credential", "command")
        key = f"{name}\0{owner_uid}" if per_owner else name
        with self._lock:
            kept = self._cache.get(key)
            keep = source.cache_seconds if source.kind == "command" else CACHE_SECONDS
            if kept is not None and time.monotonic() - kept[0] < keep:
                return kept[1]
        if source.kind == "command":
            secret = Secret("", _command(source, self.workdir, owner_uid))
        elif source.kind == "file":
            secret = Secret("", _from_file(source.file))
        elif source.kind == "env":
            secret = Secret("", _check_secret(os.environ.get(source.env, ""), source.where))
        else:
            secret = Secret(*_git_fill(source, self.workdir, owner_uid))
        with self._lock:
            self._cache[key] = (time.monotonic(), secret)
        return secret
