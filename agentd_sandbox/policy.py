"""What a sandboxed command may see and do, as plain data the daemon fills in per session."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Limits:
    """Resource ceilings; None means no limit of that kind (core dumps are always off).

    These are rlimits, per process: `memory_bytes` bounds each process's data segment and
    `processes` counts every process of the sandbox uid on the host. What a whole
    session may use is its control group's (`SandboxPolicy.cgroup_procs`); a caller that
    has one leaves these two None. `tmp_bytes` and `shm_bytes` size the sandbox's own
    /tmp and /dev/shm (RAM-backed: their pages count in the group's memory).
    """

    wall_seconds: float | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_size_bytes: int | None = None
    open_files: int | None = 1024
    cpu_seconds: int | None = None
    tmp_bytes: int | None = None
    shm_bytes: int | None = None


@dataclass
class SandboxPolicy:
    """One session's sandbox: writable roots, hidden paths, network, identity, limits."""

    writable: list[str] = field(default_factory=list)
    # Existing paths shown read-only where they are, mounted after the writable roots:
    # protected paths inside a writable root, or roots a read-only run may only read.
    read_only: list[str] = field(default_factory=list)
    # (host source, path inside): a file or directory shown read-only in place of another.
    # bwrap resolves each source as the sandbox identity: it must be able to reach it.
    ro_binds: list[tuple[str, str]] = field(default_factory=list)
    # (content, path inside): a small file of the caller's (a helper script) that bwrap
    # writes inside and shows read-only (readable and executable by all). No host path is
    # bound: the identity need not reach where the caller keeps it (a checkout in a
    # private home, a venv, a Python under /root).
    ro_files: list[tuple[bytes, str]] = field(default_factory=list)
    # Directories bwrap creates (as the sandbox identity, inside a writable root) and
    # covers with an empty read-only tmpfs, so a missing protected directory (.git/hooks)
    # cannot be filled.
    ensure_dirs: list[str] = field(default_factory=list)
    # writable root -> the root of an overlay mount whose lower layer is that root: bound
    # over the root, so the command writes a copy-on-write view (review mode) and the
    # root itself is left as it was.
    views: dict[str, str] = field(default_factory=dict)
    hidden: list[str] = field(default_factory=list)
    network: bool = False
    # A network namespace kept at this path (a bind-mounted nsfs file) that the sandbox
    # joins instead of one of its own: its session's, where the daemon's proxy listens.
    # Only when `network` is False; None: a fresh, empty namespace per sandbox.
    netns: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    uid: int | None = None
    gid: int | None = None
    # Supplementary groups of the identity (a root daemon's: the session's own group,
    # which alone may enter the session's temp and output dirs); empty: none.
    groups: list[int] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    home: str | None = None
    # Home directories (/root, /home, the daemon's and the identity's) are hidden but for
    # these paths, relative to each home (or absolute), shown read-only: toolchains, not
    # credentials. None means the default list (visibility.DEFAULT_HOME_ALLOW).
    home_allow: list[str] | None = None
    # Host unix sockets the sandbox may still connect to; every other one is hidden.
    sockets: list[str] = field(default_factory=list)
    # The cgroup.procs files of the control group every process of this sandbox is in
    # from its first instruction (agentd_sandbox.cgroups); empty: none.
    cgroup_procs: list[str] = field(default_factory=list)
