"""A session's sandbox: who its commands run as, what they may write, what they never see."""

from __future__ import annotations

import os

from agentd.config import Config
from agentd.errors import ConfigError, ToolError
from agentd.privdir import ensure_private_dir
from agentd.sessions import Session
from agentd_sandbox import Limits, SandboxPolicy


def run_as(session: Session, config: Config) -> tuple[int, int] | None:
    """The uid/gid a root daemon's sandbox runs as; None when the daemon is not root.

    The session owner's when that is not root; else the owner of the first workspace
    root (files the command creates then belong to whoever owns the workspace); else
    the configured unprivileged uid.
    """
    if os.geteuid() != 0:
        return None
    if session.owner_uid != 0:
        return session.owner_uid, _gid_of(session.owner_uid)
    st = os.stat(session.workspace_roots[0])
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    return config.sandbox_uid, config.sandbox_gid


def _gid_of(uid: int) -> int:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid


def session_tmp_dir(session: Session, config: Config) -> str:
    """The session's own temp dir, writable in its sandbox and kept between calls."""
    ident = run_as(session, config)
    uid = ident[0] if ident else os.getuid()
    base = os.path.join("/tmp", f"agentd-{uid}")
    path = os.path.join(base, session.id)
    if os.path.isdir(path):
        return path  # made by an earlier call of this session
    try:
        # /tmp is shared: a base someone else made (or made writable) is refused, and
        # never chmod-ed or chown-ed into ours.
        ensure_private_dir(base, "sandbox temp dir", owner=ident, readable_by_others=True)
    except ConfigError as exc:
        raise ToolError(f"Cannot prepare the sandbox: {exc}") from None
    os.makedirs(path, mode=0o700, exist_ok=True)
    if ident is not None:
        os.chown(path, *ident)
    return path


def policy_for(session: Session, config: Config, tmp_dir: str) -> SandboxPolicy:
    ident = run_as(session, config)
    env = {"TMPDIR": tmp_dir, **session.env}
    return SandboxPolicy(
        writable=[*session.workspace_roots, tmp_dir],
        hidden=[config.state_dir, os.path.dirname(config.socket_path)],
        network=session.allow_network,
        env=env,
        cwd=session.cwd,
        uid=ident[0] if ident else None,
        gid=ident[1] if ident else None,
        limits=Limits(
            memory_bytes=config.bash_memory_bytes,
            processes=config.bash_processes,
            file_size_bytes=config.bash_file_size_bytes,
            open_files=config.bash_open_files,
        ),
        home=tmp_dir,
    )
