"""A policy as a bubblewrap command line.

Order matters to bwrap: the read-only root first, then /dev, /proc, the sized /tmp and
/dev/shm tmpfs and the cover over cgroup mounts, then the tmpfs over homes and /run (see
visibility), the allow-list shown again, the writable binds, the read-only paths inside
them, then the hiding mounts, so a secret or a socket inside a writable root is still
covered. Only paths that exist are hidden, so bwrap never creates a placeholder in the
user's tree.
"""

from __future__ import annotations

import functools
import os
import subprocess

from . import binaries, visibility
from .identity import Identity, can_reach
from .policy import SandboxPolicy

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_HOME = "/tmp/home"
HOSTNAME = "agentd-sandbox"


def find_bwrap() -> str | None:
    """The bwrap binary, if installed."""
    return binaries.find("bwrap", "/usr/bin:/usr/local/bin:/bin")


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


def _mounts(policy: SandboxPolicy, identity: Identity) -> list[str]:
    """Everything after the base mounts, in the order that makes each layer hold:
    hide homes and endpoints, show the allow-list again, bind the writable roots, make
    the read-only paths read-only, then cover credentials and sockets last so nothing
    bound before re-exposes them."""
    argv: list[str] = []
    # Looked up once per start (each walks the passwd homes): the same answer three times.
    dirs = visibility.home_dirs(identity)
    homes = visibility.user_homes(identity, dirs)
    covered = ["/tmp", *visibility.endpoint_dirs(), *dirs]
    for path in covered[1:]:
        argv += ["--tmpfs", path]
    shown: list[str] = []
    allow = visibility.DEFAULT_HOME_ALLOW if policy.home_allow is None else policy.home_allow
    kept = visibility.kept_targets(covered)
    for path in [*visibility.allowed_home_paths(identity, allow, homes), *kept]:
        # -try: an allow-listed file its owner removes meanwhile is simply not shown; a
        # vanished entry must not stop every sandbox from starting. (Protected paths,
        # below, stay strict: a protection that cannot be mounted fails the start.)
        argv += ["--ro-bind-try", path, path]
        shown.append(path)
    sockets = [os.path.realpath(s) for s in policy.sockets]
    for path in sockets:
        if visibility.is_socket(path) and can_reach(path, identity):
            argv += ["--bind", path, path]
            shown.append(path)
    for path in policy.writable:
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            raise ValueError(f"writable path is not a directory: {path}")
        argv += ["--bind", real, real]
        shown.append(real)
    for path in policy.ensure_dirs:
        real = os.path.realpath(path)
        # bwrap makes the mount point on the host (inside a writable bind), empty, and
        # covers it with an empty read-only tmpfs.
        argv += ["--tmpfs", real, "--remount-ro", real]
        shown.append(real)
    for path in policy.read_only:
        real = os.path.realpath(path)
        if os.path.lexists(real):
            argv += ["--ro-bind", real, real]
            shown.append(real)
    for source, dest in policy.ro_binds:
        argv += ["--ro-bind", source, dest]
        shown.append(dest)
    if policy.home is None:
        argv += ["--dir", DEFAULT_HOME]
    # Every mount point inside them exists now: the emptied homes and /run go read-only
    # (not recursively: the binds inside keep their own mode).
    for path in covered[1:]:
        argv += ["--remount-ro", path]

    def visible(path: str) -> bool:
        hidden = any(visibility.under(path, d) for d in covered)
        return not hidden or any(visibility.under(path, s) for s in shown)

    for path in visibility.secret_paths(identity, policy.hidden, homes):
        if not visible(path):
            continue
        if os.path.isdir(path):
            argv += ["--tmpfs", path]
        else:
            argv += ["--ro-bind", "/dev/null", path]
    for path in visibility.host_sockets():
        real = os.path.realpath(path)
        if real in sockets or not visible(real) or not visibility.is_socket(real):
            continue
        if can_reach(real, identity):
            argv += ["--ro-bind", "/dev/null", real]
    return argv


def _own_tmpfs(policy: SandboxPolicy) -> list[str]:
    """The sandbox's RAM-backed places, each sized (their pages count in the control
    group's memory, not against any rlimit): /tmp, and /dev/shm as a tmpfs of its own so
    that the rest of bwrap's /dev (its own tmpfs, unsized) can go read-only. Every
    cgroup mount is covered by an empty read-only tmpfs: the sandbox neither sees nor
    writes its group (the cgroup namespace already shows its own as `/`)."""
    argv = [*_size(policy.limits.tmp_bytes), "--tmpfs", "/tmp"]
    argv += [*_size(policy.limits.shm_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    for path in visibility.cgroup_mounts():
        argv += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    return argv


def _size(size: int | None) -> list[str]:
    return ["--size", str(size)] if size is not None else []


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
    if not policy.network and not policy.netns:
        # (With `netns` the chain joined the session's namespace before bwrap: runner.)
        argv.append("--unshare-net")
    if supports_disable_userns(bwrap):
        argv.append("--disable-userns")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    # bwrap already remounts /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus
    # read-only over a fresh proc; tests check /proc/sys stays read-only.
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += _own_tmpfs(policy)
    argv += _mounts(policy, identity)
    argv.append("--clearenv")
    for key, value in environment(policy).items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", policy.cwd or policy.home or DEFAULT_HOME]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--", *command]
