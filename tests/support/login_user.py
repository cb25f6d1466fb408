"""A non-root login user, for what differs when agentd is not run by root.

A login user's daemon listens under XDG_RUNTIME_DIR (`/run/user/UID/agentd/agentd.sock`,
made by logind), and the programs it starts see only that user's rights. The tests run
as root, so the user is made once (`useradd`, if missing) and each command runs as it
through setpriv, with the environment a login shell has.

The project's Python (a pyenv build), the CLIs `make test` installs, and the checkout
with its venv can live under /root, which is 0700: each command runs in a mount
namespace of its own where /root is an empty tmpfs with just those directories bound
back, at their own paths. Nothing else of the machine changes for it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.daemon import runs_from

NAME = "agentd-login"

# Binds /root's needed directories back over an empty /root, then becomes the user.
_ENTER = r"""
set -e
stash="$1"; uid="$2"; gid="$3"; n="$4"
shift 4
mount --rbind /root "$stash"
mount -t tmpfs -o mode=0755 tmpfs /root
i=0
while [ "$i" -lt "$n" ]; do
  sub="$1"; shift
  mkdir -p "/root/$sub"
  mount --rbind "$stash/$sub" "/root/$sub"
  i=$((i + 1))
done
umount -l "$stash"
exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
"""


def available() -> str:
    """Why login-user tests cannot run here, or "" when they can."""
    if os.geteuid() != 0:
        return "needs root (to make and become a login user)"
    for tool in ("useradd", "setpriv", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return ""


@dataclass
class LoginUser:
    name: str
    uid: int
    gid: int
    home: Path
    runtime_dir: Path  # its XDG_RUNTIME_DIR, 0700, as logind makes /run/user/UID
    _stash: Path
    _exposed: list[str]

    def env(self, **extra: str) -> dict[str, str]:
        """What a login shell of the user has, and the project's venv first on PATH."""
        venv_bin = str(Path(sys.executable).parent)
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            **extra,
        }

    def argv(self, *command: str) -> list[str]:
        """`command` run as the user, in a mount namespace that shows it /root's parts
        the tests run from."""
        return [
            "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", _ENTER, "enter", str(self._stash), str(self.uid), str(self.gid),
            str(len(self._exposed)), *self._exposed, *command,
        ]  # fmt: skip

    def run(
        self, *command: str, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        return subprocess.run(self.argv(*command), env=env or self.env(), **kw)

    def popen(self, *command: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
        return subprocess.Popen(self.argv(*command), env=env or self.env(), **kw)

    def own(self, path: Path, mode: int = 0o700) -> Path:
        """A directory of the user's (made if missing)."""
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, self.uid, self.gid)
        path.chmod(mode)
        return path


def _under_root(path: str) -> str | None:
    real = os.path.realpath(path)
    return os.path.relpath(real, "/root") if real.startswith("/root/") else None


def login_user(base: Path, also: list[str] | None = None) -> LoginUser:
    """The login user (made if missing), its runtime dir under `base`; `also` lists more
    paths under /root (a CLI's install) to show it."""
    try:
        entry = pwd.getpwnam(NAME)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", NAME],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(NAME)
    home = Path(entry.pw_dir)
    # The interpreter's whole prefix (pyenv's), and whatever else the caller names.
    wanted = [sys.base_prefix, os.path.realpath(sys.executable), *(also or [])]
    exposed: list[str] = []
    for path in wanted:
        sub = _under_root(path)
        if sub is None:
            continue
        # The top directory under /root (pyenv's whole tree), in ~/.cache the one below.
        parts = sub.split(os.sep)
        top = os.path.join(*parts[:2]) if parts[0] == ".cache" and len(parts) > 1 else parts[0]
        if top not in exposed:
            exposed.append(top)
    # The checkout and its venv (what else the tests run from), where a clone under /root
    # has them: each directory itself, under directories made in the namespace, as a 0700
    # one on its way would keep the user out (issue #34).
    for path in sorted(runs_from(), key=len):
        sub = _under_root(path)
        if sub is None or not os.path.isdir(path):
            continue
        if not any(sub == e or sub.startswith(e + os.sep) for e in exposed):
            exposed.append(sub)
    stash = base / "root-stash"
    stash.mkdir(mode=0o700, exist_ok=True)
    user = LoginUser(NAME, entry.pw_uid, entry.pw_gid, home, base, stash, exposed)
    user.runtime_dir = user.own(base / f"run-user-{entry.pw_uid}")
    return user
