"""A policy as a bubblewrap command line.

Order matters to bwrap: the read-only root first, then /dev, /proc, the sized /tmp and
/dev/shm tmpfs and the cover over cgroup mounts, then the tmpfs over homes and /run (see
visibility), the allow-list shown again, the writable binds, the read-only paths inside
them, then the hiding mounts, so a secret or a socket inside a writable root is still
covered. Only paths that exist are hidden, so bwrap never creates a placeholder in the
user's tree.
"""

from __future__ import annotations

import errno
import functools
import os
import subprocess
from collections.abc import Callable, Sequence

from . import anchored, binaries, hostview, mounts, visibility
from .errors import PathGone, SandboxUnavailable
from .identity import Identity, can_reach, resolve
from .mounts import BINDS, Mount, MountList, Role
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


def _mounts(policy: SandboxPolicy, identity: Identity) -> MountList:
    """Everything after the base mounts, in the order that makes each layer hold:
    hide homes and endpoints, show the allow-list again, bind the writable roots, make
    the read-only paths read-only, then cover credentials and sockets last so nothing
    bound before re-exposes them. Paths of the policy are bound by descriptor
    (anchored.py): a root opened with no link on its way, a path inside a root opened
    beneath it; a name with a link on its way is bound nowhere. The list is checked
    (mounts.check) before anything starts."""
    out = MountList()
    try:
        _fill(out, policy, identity)
    except BaseException:
        out.close()
        raise
    return out


def _fill(out: MountList, policy: SandboxPolicy, identity: Identity) -> None:
    # The host's homes, allow-list and credentials, kept while they hold (hostview.py).
    view = _host_view(policy, identity)
    covered = view.covered
    for path in covered[1:]:
        out.add(Mount("tmpfs", path, Role.COVER))
    for path in [*view.allowed, *view.kept]:
        # -try: an allow-listed file its owner removes meanwhile is simply not shown; a
        # vanished entry must not stop every sandbox from starting. (Protected paths,
        # below, stay strict: a protection that cannot be mounted fails the start.)
        out.add(Mount("ro-bind-try", path, Role.GRANT, source=path))
    sockets = [os.path.realpath(s) for s in policy.sockets]
    for path in sockets:
        if visibility.is_socket(path) and can_reach(path, identity):
            out.add(Mount("bind", path, Role.GRANT, source=path))
    roots = _Roots(out)
    for path in policy.writable:
        anchored = roots.open(path, directory=True)
        if anchored is not None:
            fd, dest, role = anchored
            out.add(Mount("bind", dest, role, fd=fd))
            if path in policy.views:
                overlay = roots.open_top(os.path.realpath(policy.views[path]), directory=True)
                out.add(Mount("bind", dest, Role.VIEW, fd=overlay))
    for path in policy.ensure_dirs:
        # bwrap makes the mount point on the host (inside a writable bind), empty, and
        # covers it with an empty read-only tmpfs; its parent must be no link.
        parent = roots.dest_of(os.path.dirname(path))
        if parent is not None:
            dest = os.path.join(parent, os.path.basename(path))
            out.add(Mount("tmpfs", dest, Role.PROTECT))
            out.add(Mount("remount-ro", dest, Role.FIXUP))
    for path in policy.read_only:
        anchored = roots.open(path)
        if anchored is not None:
            fd, dest, role = anchored
            out.add(Mount("ro-bind", dest, role, fd=fd))
    for source, dest in policy.ro_binds:
        # The daemon's own files (staged configs, the output dir), shown at `dest`.
        fd = roots.open_top(os.path.realpath(source))
        out.add(Mount("ro-bind", dest, Role.GRANT, fd=fd))
    for content, dest in policy.ro_files:
        # Given by content: bwrap resolves a bound source as the sandbox identity (even
        # a descriptor's, through its path), which may not reach where the caller is.
        out.add(Mount("ro-bind-data", dest, Role.GRANT, fd=_content_fd(out, content)))
    if policy.home is None:
        out.add(Mount("dir", DEFAULT_HOME, Role.FIXUP))
    # Every mount point inside them exists now: the emptied homes and /run go read-only
    # (not recursively: the binds inside keep their own mode).
    for path in covered[1:]:
        out.add(Mount("remount-ro", path, Role.FIXUP))
    shown = [m.dest for m in out.mounts if m.op in BINDS]

    def visible(path: str) -> bool:
        hidden = any(visibility.under(path, d) for d in covered)
        return not hidden or any(visibility.under(path, s) for s in shown)

    secrets: list[str] = []
    for path in _secrets(view, policy, identity):
        if not visible(path):
            continue
        secrets.append(path)
        if os.path.isdir(path):
            out.add(Mount("tmpfs", path, Role.HIDE))
        else:
            out.add(Mount("ro-bind", path, Role.HIDE, source="/dev/null"))
    for path in visibility.host_sockets():
        real = os.path.realpath(path)
        if real in sockets or not visible(real) or not visibility.is_socket(real):
            continue
        if can_reach(real, identity):
            secrets.append(real)
            out.add(Mount("ro-bind", real, Role.HIDE, source="/dev/null"))
    mounts.check(out.mounts, covered, secrets)


def _host_view(policy: SandboxPolicy, identity: Identity) -> hostview.HostView:
    allow = visibility.DEFAULT_HOME_ALLOW if policy.home_allow is None else policy.home_allow
    return hostview.VIEWS.get(identity, tuple(allow))


def _secrets(view: hostview.HostView, policy: SandboxPolicy, identity: Identity) -> list[str]:
    """The credentials in the homes (kept), and the policy's own hidden paths (looked up)."""
    own = visibility.secret_paths(identity, policy.hidden, homes=[])
    return list(dict.fromkeys([*view.secrets, *own]))


def hides(policy: SandboxPolicy) -> Callable[[str], bool]:
    """Whether the sandbox of `policy` keeps a real host path from its commands: a
    credential or the daemon's own file, or a path in a covered place (/tmp, /run, a
    home) that nothing the policy shows holds. The daemon asks it before it stages a
    file for such a path (a sanitised git config): what is hidden gets no stand-in."""
    ident = resolve(policy)
    view = _host_view(policy, ident)
    covered = view.covered
    shown = [os.path.realpath(p) for p in (*policy.writable, *policy.read_only)]
    shown += [*view.allowed, *view.kept]
    secrets = _secrets(view, policy, ident)

    def hidden(path: str) -> bool:
        if any(mounts.under(path, s) for s in secrets):
            return True
        inside = any(mounts.under(path, c) for c in covered)
        return inside and not any(mounts.under(path, s) for s in shown)

    return hidden


def _content_fd(out: MountList, content: bytes) -> int:
    """A memfd holding `content`, read from its start by bwrap (which then closes it)."""
    fd = os.memfd_create("agentd-sandbox-file", os.MFD_CLOEXEC)
    out.fds.append(fd)
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Roots:
    """The policy's paths as descriptors: each top-level one opened from / with no link
    on its way, each inside another opened beneath it (anchored.py)."""

    def __init__(self, out: MountList) -> None:
        self._out = out
        self._roots: list[tuple[str, str, int]] = []  # (as named, real path, fd)

    def open_top(self, real: str, *, directory: bool = False, missing_ok: bool = False) -> int:
        """A root the policy names, resolved once; SandboxUnavailable if it is not there
        or a link appeared on its way since (a start planned again may succeed);
        -1 when it is not there and `missing_ok`."""
        flags = os.O_PATH | (os.O_DIRECTORY if directory else 0)
        try:
            fd = anchored.open_path(real, flags)
        except OSError as exc:
            if missing_ok and exc.errno == errno.ENOENT:
                return -1
            gone = exc.errno == errno.ENOENT or anchored.is_link_refusal(exc)
            raise (PathGone if gone else SandboxUnavailable)(
                f"cannot open {real} for the sandbox: {exc.strerror}"
            ) from None
        self._out.fds.append(fd)
        return fd

    def open(self, path: str, *, directory: bool = False) -> tuple[int, str, Role] | None:
        """(descriptor, destination, role) for `path`; None when it is inside a root and
        missing or a link (it is then bound nowhere), or a read-only root (not a
        `directory` to write) that is missing, as a session's output dir before its
        first command."""
        path = os.path.normpath(path)
        for named, real, fd in self._roots:
            if named == path:
                # Named twice: bwrap closes a descriptor once it has bound it.
                again = os.dup(fd)
                self._out.fds.append(again)
                return again, real, Role.GRANT
        root = self._root_of(path)
        if root is None:
            real = os.path.realpath(path)
            if directory and not os.path.isdir(real):
                raise ValueError(f"writable path is not a directory: {path}")
            fd = self.open_top(real, directory=directory, missing_ok=not directory)
            if fd < 0:
                return None
            self._roots.append((path, real, fd))
            return fd, real, Role.GRANT
        opened = self._beneath(root, path, directory)
        if opened is None:
            return None
        fd, dest = opened
        self._out.fds.append(fd)
        return fd, dest, Role.PROTECT

    def dest_of(self, path: str) -> str | None:
        """The real path of the directory `path` inside a root, checked to be one with no
        link on its way; None if it is missing or a link."""
        path = os.path.normpath(path)
        for named, real, _ in self._roots:
            if named == path:
                return real
        root = self._root_of(path)
        opened = self._beneath(root, path, True) if root is not None else None
        if opened is None:
            return None
        os.close(opened[0])
        return opened[1]

    def _root_of(self, path: str) -> tuple[str, str, int] | None:
        inside = [r for r in self._roots if visibility.under(path, r[0]) and path != r[0]]
        return max(inside, key=lambda r: len(r[0]), default=None)

    def _beneath(
        self, root: tuple[str, str, int], path: str, directory: bool
    ) -> tuple[int, str] | None:
        named, real_root, root_fd = root
        rel = os.path.relpath(path, named)
        flags = os.O_PATH | (os.O_DIRECTORY if directory else 0)
        try:
            fd = anchored.open_beneath(root_fd, rel, flags)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) or anchored.is_link_refusal(exc):
                return None  # missing, or a link: never bound at its target
            raise SandboxUnavailable(
                f"cannot open {path} for the sandbox: {exc.strerror}"
            ) from None
        return fd, os.path.join(real_root, rel)


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


def supports_bind_fd(path: str) -> bool:
    """Whether this bwrap binds an open descriptor (`--bind-fd`: 0.10, or backported)."""
    return "--bind-fd" in bwrap_help(path)


def build_argv(
    policy: SandboxPolicy,
    command: list[str],
    *,
    identity: Identity,
    bwrap: str,
    seccomp_fds: Sequence[int] = (),
) -> tuple[list[str], MountList]:
    """The full bwrap argv running `command` under `policy`, and the mount list whose
    descriptors it names (pass them to bwrap, then close them)."""
    if not command:
        raise ValueError("empty command")
    if not supports_bind_fd(bwrap):
        raise SandboxUnavailable(
            f"{bwrap} cannot bind a descriptor (--bind-fd); install bubblewrap 0.8.0 or "
            "later: the sandbox binds workspace paths by descriptor only"
        )
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
    mount_list = _mounts(policy, identity)
    argv += mount_list.argv()
    argv.append("--clearenv")
    for key, value in environment(policy).items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", policy.cwd or policy.home or DEFAULT_HOME]
    for fd in seccomp_fds:  # each filter installed; the kernel applies them all
        argv += ["--add-seccomp-fd", str(fd)]
    return [*argv, "--", *command], mount_list
