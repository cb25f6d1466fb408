"""A policy as a bubblewrap command line.

Order matters to bwrap: the read-only root first, then /dev, /proc and the /tmp
tmpfs, then the writable binds, then the hiding mounts, so a secret inside a writable
root is still covered. Only paths that exist are hidden, so bwrap never creates a
placeholder in the user's tree.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from .identity import Identity, can_reach, home_of
from .policy import SandboxPolicy

# Credentials under a home directory that no sandbox may read.
SECRET_HOME_ENTRIES: tuple[str, ...] = (
    ".ssh", ".aws", ".config/gcloud", ".netrc", ".docker", ".kube", ".gnupg",
)  # fmt: skip
SECRET_PATHS: tuple[str, ...] = ("/etc/shadow", "/etc/gshadow")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_HOME = "/tmp/home"
HOSTNAME = "agentd-sandbox"


def find_bwrap() -> str | None:
    """The bwrap binary, if installed."""
    return shutil.which("bwrap", path="/usr/bin:/usr/local/bin:/bin")


@functools.cache
def bwrap_help(path: str) -> str:
    """bwrap's --help text, from which supported flags are read."""
    out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    return out.stdout + out.stderr


@functools.cache
def bwrap_version(path: str) -> str:
    """bwrap's version string, e.g. "0.8.0"."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip().removeprefix("bubblewrap ").strip()


def supports_disable_userns(path: str) -> bool:
    """Whether this bwrap can forbid new user namespaces inside the sandbox."""
    return "--disable-userns" in bwrap_help(path)


def is_setuid(path: str) -> bool:
    """A setuid bwrap keeps privileges we do not want and refuses some options."""
    return bool(os.stat(path).st_mode & 0o4000)


def secret_paths(identity: Identity, extra: list[str]) -> list[str]:
    """Existing real paths to hide: credentials in every relevant home, plus `extra`."""
    homes = {"/root", os.path.expanduser("~")}
    for uid in (os.geteuid(), identity.uid):
        home = home_of(uid)
        if home:
            homes.add(home)
    candidates = [os.path.join(h, e) for h in sorted(homes) for e in SECRET_HOME_ENTRIES]
    candidates += [*SECRET_PATHS, *extra]
    found: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        # A path the sandbox identity cannot reach is closed to it already, and bwrap
        # (running as that identity) could not mount over it.
        if real not in found and os.path.exists(real) and can_reach(real, identity):
            found.append(real)
    return found


def environment(policy: SandboxPolicy) -> dict[str, str]:
    """The sandbox environment: a fixed PATH and HOME, LANG and TERM from the host, then
    the session's own variables."""
    env = {
        "PATH": DEFAULT_PATH,
        "HOME": policy.home or DEFAULT_HOME,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": os.environ.get("TERM", "dumb"),
    }
    env.update(policy.env)
    return env


def build_argv(
    policy: SandboxPolicy,
    command: list[str],
    *,
    identity: Identity,
    bwrap: str,
    seccomp_fd: int | None,
) -> list[str]:
    """The full bwrap argv running `command` under `policy`."""
    if not command:
        raise ValueError("empty command")
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--hostname", HOSTNAME]
    if not policy.network:
        argv.append("--unshare-net")
    if supports_disable_userns(bwrap):
        argv.append("--disable-userns")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    # bwrap already remounts /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus
    # read-only over a fresh proc; tests check /proc/sys stays read-only.
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in policy.writable:
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            raise ValueError(f"writable path is not a directory: {path}")
        argv += ["--bind", real, real]
    for path in policy.read_only:
        real = os.path.realpath(path)
        if os.path.lexists(real):
            argv += ["--ro-bind", real, real]
    for source, dest in policy.ro_binds:
        argv += ["--ro-bind", source, dest]
    home = policy.home or DEFAULT_HOME
    if policy.home is None:
        argv += ["--dir", DEFAULT_HOME]
    for path in secret_paths(identity, policy.hidden):
        if os.path.isdir(path):
            argv += ["--tmpfs", path]
        else:
            argv += ["--ro-bind", "/dev/null", path]
    argv.append("--clearenv")
    for key, value in environment(policy).items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", policy.cwd or home]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--", *command]
