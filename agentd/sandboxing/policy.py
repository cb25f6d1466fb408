"""A session's sandbox: who its commands run as, what they may write, what they never see."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentd.foundation.config import Config, default_config_file
from agentd.foundation.errors import ToolError
from agentd.fs.identity import FsIdentity
from agentd.sandboxing.protected import SandboxProtection, sandbox_protection
from agentd.sessions import dirs as session_dirs
from agentd.sessions.session import Session, network_mode
from agentd_sandbox import Limits, SandboxPolicy

if TYPE_CHECKING:  # the runtime holds read-only runs' staging, which builds on this
    from agentd.sandboxing.runtime import SandboxRuntime


def run_as(session: Session, config: Config) -> tuple[int, int] | None:
    """The uid/gid a root daemon's sandbox runs as; None when the daemon is not root.

    The session owner's when that is not root; else the owner of the first workspace
    root (files the command creates then belong to whoever owns the workspace); else
    the configured unprivileged uid. Its supplementary group is the session's own
    (session_group).
    """
    if os.geteuid() != 0:
        return None
    if session.owner_uid != 0:
        return session.owner_uid, _gid_of(session.owner_uid)
    st = os.stat(session.workspace_roots[0])
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    return config.sandbox_uid, config.sandbox_gid


def session_group(session: Session, config: Config) -> int | None:
    """The group that alone may enter the session's temp and output dirs: its own
    (agentd/sessions/gids.py), held by its commands and file tools as a supplementary
    group; without one, its identity's group; None when the daemon is not root."""
    ident = run_as(session, config)
    if ident is None:
        return None
    return session.sandbox_gid or ident[1]


def fs_identity(session: Session, config: Config) -> FsIdentity | None:
    """The identity the daemon's file work for the session has (run_as, and the
    session's own group beside it); None when the daemon is not root."""
    ident = run_as(session, config)
    if ident is None:
        return None
    groups = (session.sandbox_gid,) if session.sandbox_gid else ()
    return FsIdentity(*ident, groups=groups)


def run_as_chosen_by(session: Session, config: Config) -> str:
    """Why run_as picks the identity it picks, in words for a person."""
    if os.geteuid() != 0:
        return "the daemon's own user"
    if session.owner_uid != 0:
        return "the session's owner"
    if os.stat(session.workspace_roots[0]).st_uid != 0:
        return "the workspace's owner"
    return "sandbox_uid, as root owns the workspace"


def _gid_of(uid: int) -> int:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid


def session_tmp_path(session: Session, config: Config) -> str:
    """Where the session's temp dir is (made or not): under this daemon's own base for
    session directories (agentd/sessions/dirs.py), never at a name others could take."""
    return session_dirs.of(config.state_dir).tmp_path(session.id)


def session_tmp_dir(session: Session, config: Config, runtime: SandboxRuntime) -> str:
    """The session's own temp dir, writable in its sandbox and kept between calls: root's
    and the session's group's (0770), so no other session's sandbox may enter it; a
    sized tmpfs of its own where the runtime mounts them."""
    group = session_group(session, config)
    mounts = runtime.tmp_mounts
    # session_tmp_bytes 0: a plain directory, on /tmp's disk
    sized = mounts is not None and config.session_tmp_bytes > 0
    try:
        path = session_dirs.of(config.state_dir).tmp_dir(session.id, group)
        if mounts is not None and sized and not mounts.is_sized(path):
            # Root's and the session's group's, as the directory under it (dirs.py).
            owner = (os.geteuid(), group) if group is not None else None
            mounts.size(path, config.session_tmp_bytes, owner, mode=0o770)
    except OSError as exc:
        raise ToolError(
            f"Cannot prepare the sandbox: its temp dir cannot be made ({exc})"
        ) from None
    return path


def daemon_secrets(config: Config) -> list[str]:
    """The daemon's own files no sandbox may see: its state, its socket's directory, its
    config file (it may hold the TCP token), its token file and its TLS key."""
    paths = [config.state_dir, os.path.dirname(config.socket_path)]
    paths += [
        p
        for p in (config.config_file, default_config_file(), config.token_file, config.tls_key)
        if p
    ]
    # The keys the sandbox's ssh-agent signs with, and the owner's agent.
    paths += [*config.ssh_agent_key_files, *filter(None, [config.ssh_agent_upstream])]
    return paths


def policy_for(
    session: Session,
    config: Config,
    tmp_dir: str,
    runtime: SandboxRuntime,
    *,
    read_only: bool = False,
    search: bool = False,
    protection: Callable[[str, FsIdentity | None], SandboxProtection] | None = None,
) -> SandboxPolicy:
    """The session's sandbox, with the runtime's network, ssh-agent and control group;
    `read_only`: every workspace root read-only and no network, only the temp dir
    writable (a command run on the classifier's read-only verdict); `search`: the base of
    a search's sandbox (agentd/runs/launch.py search_policy), which shows its own paths
    read-only and has no network, so neither the roots' protected paths are walked nor
    the session's network namespace made. `protection`: each root's protected paths (a
    cache of them: agentd/runs/plans.py).

    Blocking work (a walk of a hostile workspace's nested git directories, up to
    MAX_WALKED_DIRS; the namespace's first making): callers on the event loop run it on a
    thread."""
    ident = run_as(session, config)
    procs, held = _session_group(session, runtime)
    env = {"TMPDIR": tmp_dir, **session.env}
    roots = list(session.workspace_roots)
    pinned: list[str] = []
    protected: list[str] = []
    ensure_dirs: list[str] = []
    fs_ident = FsIdentity(*ident) if ident else None
    protect = protection or sandbox_protection
    for root in roots if not search else ():
        found = protect(root, fs_ident)
        pinned += found.pinned
        protected += found.read_only
        ensure_dirs += found.ensure_dirs
    # First: what the proxy is told (the session's CA) follows what the sandbox is shown.
    masked_files = _masked(session, env, runtime)
    network, netns, ro_files = _network(session, env, read_only or search, runtime)
    ro_files += masked_files
    ro_binds = _ssh_agent(session, env, network or netns is not None, tmp_dir, runtime)
    if read_only:
        writable = [tmp_dir]
        shown = [r for r in roots if not _contains(r, tmp_dir)]
        protected = [*shown, *pinned, *protected]
    else:
        # Pinned git directories follow their root, so they are mount points of their own.
        writable = [*roots, *pinned, tmp_dir]
    return SandboxPolicy(
        writable=writable,
        read_only=protected,
        ensure_dirs=ensure_dirs,
        hidden=daemon_secrets(config),
        home_allow=list(config.sandbox_home_allow),
        sockets=list(config.sandbox_sockets),
        network=network,
        netns=netns,
        ro_binds=ro_binds,
        ro_files=ro_files,
        env=env,
        cwd=session.cwd,
        uid=ident[0] if ident else None,
        gid=ident[1] if ident else None,
        groups=[session.sandbox_gid] if ident and session.sandbox_gid else [],
        limits=_limits(config, held),
        home=sandbox_home(tmp_dir, ident),
        cgroup_procs=procs,
    )


def _network(
    session: Session, env: dict[str, str], read_only: bool, runtime: SandboxRuntime
) -> tuple[bool, str | None, list[tuple[bytes, str]]]:
    """(the host's network, the kept namespace to join, files given by content) by the
    session's mode; proxied: `env` gets the proxy's variables. A read-only run has none."""
    mode = network_mode(session)
    if read_only or mode == "off":
        return False, None, []
    if mode == "on":
        return True, None, []
    service = runtime.network
    if service is None or not service.available():
        return False, None, []  # no namespace of its own to keep here: no network
    try:
        access = service.access(session)
    except OSError as exc:
        raise ToolError(
            f"Cannot prepare the sandbox: the session's network namespace cannot be made ({exc})"
        ) from None
    env.update(access.env)
    return False, access.netns, list(access.ro_files)


def _masked(
    session: Session, env: dict[str, str], runtime: SandboxRuntime
) -> list[tuple[bytes, str]]:
    """sandbox.credentials: `env` gets each masked variable's placeholder and loses each
    denied one (whatever the session's environment said); the files shown instead."""
    masks = runtime.masks
    if masks is None:
        return []
    view = masks.sandbox_view(session)
    for name in view.unset:
        env.pop(name, None)
    env.update(view.env)
    return list(view.files)


def _ssh_agent(
    session: Session, env: dict[str, str], networked: bool, tmp_dir: str, runtime: SandboxRuntime
) -> list[tuple[str, str]]:
    """A networked sandbox's ssh-agent: the session's agent directory bound at
    /run/agentd-ssh (agentd/credentials/ssh_agent_dir.py); `env` gets SSH_AUTH_SOCK."""
    agent = runtime.ssh_agent
    if agent is None or not networked:
        return []
    try:
        # Beside the temp dir, in the session's own directory (agentd/sessions/dirs.py).
        return agent.access(session, os.path.dirname(tmp_dir), env)
    except OSError as exc:
        raise ToolError(
            f"Cannot prepare the sandbox: the session's ssh-agent socket cannot be made ({exc})"
        ) from None


def _session_group(session: Session, runtime: SandboxRuntime) -> tuple[list[str], frozenset[str]]:
    """The session's control group to join and what it holds (agentd.sandboxing.groups)."""
    groups = runtime.groups
    if groups is None:
        return [], frozenset()
    try:
        return groups.join(session.id), groups.controllers
    except OSError as exc:
        raise ToolError(
            f"Cannot prepare the sandbox: the session's control group cannot be made ({exc})"
        ) from None


def _limits(config: Config, held: frozenset[str]) -> Limits:
    """Per-process rlimits only for what the session's group does not hold."""
    return Limits(
        memory_bytes=None if "memory" in held else config.bash_memory_bytes,
        processes=None if "pids" in held else config.bash_processes,
        file_size_bytes=config.bash_file_size_bytes,
        open_files=config.bash_open_files,
        tmp_bytes=config.sandbox_tmp_bytes,
        shm_bytes=config.sandbox_shm_bytes,
    )


def sandbox_home(tmp_dir: str, ident: tuple[int, int] | None) -> str:
    """The HOME of every Bash run of the session: `home` inside its temp dir.

    Apart from the temp dir itself, so that a read-only run, which may write the temp
    dir, sees HOME read-only and cannot plant configuration (`.gitconfig`, `.npmrc`,
    `.cargo/config.toml`, Python's usercustomize…) that a later run with write access
    would obey. It must be a real directory (a mount point then cannot be renamed or
    replaced from inside); anything else in its place, which only a sandboxed command can
    have made, is removed without following it.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    dir_fd = os.open(tmp_dir, flags)
    try:
        try:
            st = os.lstat("home", dir_fd=dir_fd)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink("home", dir_fd=dir_fd)
            st = None
        if st is None:
            os.mkdir("home", 0o700, dir_fd=dir_fd)
            if ident is not None and os.geteuid() == 0:
                os.chown("home", *ident, dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.close(dir_fd)
    return os.path.join(tmp_dir, "home")


def _contains(root: str, path: str) -> bool:
    root, path = os.path.realpath(root), os.path.realpath(path)
    return path == root or path.startswith(root.rstrip("/") + "/")
