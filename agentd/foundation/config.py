"""Every setting of the daemon and its default, in one place.

Precedence, lowest first: defaults, the TOML file (`--config`, else
`$AGENTD_CONFIG`, else `$XDG_CONFIG_HOME/agentd/config.toml` when it exists),
environment variables (`AGENTD_SOCKET`, `AGENTD_STATE_DIR`), command-line flags.

Every value is checked against its field's type hint when a Config is made, from
whichever source it came: a string where a list belongs, `true` where a number
belongs, a negative limit or an unknown mode is a one-line error naming the key,
never a silently different meaning (`trusted_workspaces = "/src"` must not trust
every workspace). The checks are derived from the hints, so a new setting is
checked by declaring it; `Annotated` constraints narrow a type where needed.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import tomllib
import typing
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

import annotated_types as at
from pydantic import AfterValidator, ConfigDict, TypeAdapter, ValidationError

import agentd_sandbox.visibility
from agentd.foundation.errors import ConfigError

# The client finds the socket the same way; one definition serves both.
from agentd_client import default_socket_path

# The largest value any count or size may take: what a C long (setrlimit, SQLite) holds.
_MAX_INT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Expect:
    """How an error message describes a constrained type ("a host:port", ...)."""

    text: str


def _listen_address(value: str) -> str:
    if not value:
        return value
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("not a host:port")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError("not a host:port")
    return value


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("not a log level")
    return level


def _host_or_network(value: str) -> str:
    """A host name, an IP address or a network (CIDR), as WebFetch matches them."""
    name = value.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")
    try:
        ipaddress.ip_network(name, strict=False)
    except ValueError:
        if not _HOST_NAME.fullmatch(name) or len(name) > 253:
            raise ValueError("not a host name, IP address or network") from None
    return name


_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")


Positive = Annotated[int, at.Gt(0), at.Le(_MAX_INT)]
NonNegative = Annotated[int, at.Ge(0), at.Le(_MAX_INT)]
Id = Annotated[int, at.Ge(0), at.Le(2**32 - 2)]
Seconds = Annotated[float, at.Gt(0), at.Le(10**9)]


def _id_range(value: list[int]) -> list[int]:
    if not value:
        return value
    if len(value) != 2 or value[1] < 1 or not 1 <= value[0] <= 2**32 - 2 - value[1]:
        raise ValueError("not [first, count]")
    return value


IdRange = Annotated[
    list[int], AfterValidator(_id_range), Expect("[first, count] of ids, or [] for none")
]
SecondsOrNever = Annotated[float, at.Ge(0), at.Le(10**9)]
CpuWeight = Annotated[int, at.Ge(1), at.Le(10000)]
PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"]
ListenAddress = Annotated[
    str, AfterValidator(_listen_address), Expect('"host:port", or "" for none')
]
LogLevel = Annotated[
    str, AfterValidator(_log_level), Expect("one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
]
HostPattern = Annotated[
    str, AfterValidator(_host_or_network), Expect("a host name, IP address or CIDR network")
]


def default_state_dir() -> str:
    if path := os.environ.get("AGENTD_STATE_DIR"):
        return path
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "agentd")


def default_tmp_owners_dir() -> str:
    """Beside the default state dir, the user's own: never a fixed name in /tmp, which
    any local user could make first."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "agentd-owners")


def config_file_path() -> str:
    """Where `agentd serve` looks for its config when no --config is given (whether or
    not a file is there): $AGENTD_CONFIG, else $XDG_CONFIG_HOME/agentd/config.toml."""
    if path := os.environ.get("AGENTD_CONFIG"):
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "agentd", "config.toml")


def default_config_file() -> str | None:
    path = config_file_path()
    return path if os.environ.get("AGENTD_CONFIG") or os.path.exists(path) else None


@dataclass
class Config:
    socket_path: str = field(default_factory=default_socket_path)
    # Seconds clients wait in the socket's backlog for a daemon that died to come back
    # (its listening socket is held meanwhile); beyond, they are refused. 0: at once.
    restart_wait_seconds: SecondsOrNever = 60.0
    state_dir: str = field(default_factory=default_state_dir)
    # TCP is off unless set ("127.0.0.1:7777"); it then needs tls_cert, tls_key and a
    # token: token_file (a file holding it, kept 0600; `agentd tls init` makes one) or token.
    tcp_listen: ListenAddress = ""
    tls_cert: str = ""
    tls_key: str = ""
    token: str = ""
    log_level: LogLevel = "INFO"
    # Largest request a client may send, in bytes.
    max_message_bytes: Positive = 16 * 1024 * 1024
    default_permission_mode: PermissionMode = "default"
    # Seconds an "ask" waits for a person before it becomes a deny.
    permission_timeout_seconds: Seconds = 60.0
    # Rules from the daemon's own config, in Claude Code's syntax.
    allow_rules: list[str] = field(default_factory=list)
    deny_rules: list[str] = field(default_factory=list)
    ask_rules: list[str] = field(default_factory=list)
    # Workspace settings files whose widening parts (allow rules, additionalDirectories,
    # a widening defaultMode, hooks...) apply: exact content only, as
    # [{path = "/ws/.claude/settings.json", sha256 = "<hex>"}] (`agentctl trust ls` shows
    # both). People's approvals (`agentctl trust approve`) live in the state DB.
    trusted_settings: list[dict[str, str]] = field(default_factory=list)
    # Hosts WebFetch may reach although they resolve to loopback, private, link-local or
    # other internal addresses: names ("wiki.corp"), addresses or networks ("10.1.0.0/16").
    webfetch_allow_private_hosts: list[HostPattern] = field(default_factory=list)
    # A new session's network unless its client asks for one (allow_network: "on"):
    # "proxied" (its own namespace, out only through the daemon's proxy, hosts allowed
    # by name), "off" (no network at all) or "on" (the host's network, unfiltered).
    network_default: Literal["proxied", "off", "on"] = "proxied"
    # Hosts every proxied session may reach, in Claude Code's sandbox.network vocabulary
    # ("example.com", "*.example.com", either with ":port"); denied ones win.
    network_allowed_domains: list[str] = field(default_factory=list)
    network_denied_domains: list[str] = field(default_factory=list)
    # A sentence a refusal by a denied entry passes on to the program (and the model):
    # {"paste.example.com" = "Pastebins leak code; share through git.corp instead."}.
    network_denied_domain_reasons: dict[str, str] = field(default_factory=dict)
    # Named sets of allowed hosts (agentd/network/presets.toml): "pypi", "npm",
    # "package-registries", "github"; a session adds one with `agentctl network --preset`.
    network_presets: list[str] = field(default_factory=list)
    # Hosts the proxy may connect to although they resolve to loopback, private,
    # link-local or other internal addresses: names, addresses or networks.
    network_allow_private_hosts: list[HostPattern] = field(default_factory=list)
    # Names the proxy resolves without DNS: {"pypi.test" = ["127.0.0.1"]} (tests).
    network_resolve: dict[str, list[str]] = field(default_factory=dict)
    # The proxy's ports on the loopback of each session's namespace.
    network_http_port: Annotated[int, at.Ge(1), at.Le(65535)] = 3128
    network_socks_port: Annotated[int, at.Ge(1), at.Le(65535)] = 1080
    # The ssh-agent every networked sandbox sees at $SSH_AUTH_SOCK, signing with
    # keys the sandbox never holds (agentd/credentials/ssh_agent_service.py).
    # Hosts it may sign for ("git.example.com", "host:2222"); none: no agent at all.
    ssh_agent_hosts: list[str] = field(default_factory=list)
    # Private key files (OpenSSH format, no passphrase) the daemon reads and signs with.
    ssh_agent_key_files: list[str] = field(default_factory=list)
    # The owner's ssh-agent socket (their $SSH_AUTH_SOCK), whose keys sign too.
    ssh_agent_upstream: str = ""
    # The known_hosts listing those hosts' keys; "": ~/.ssh/known_hosts of the daemon's user.
    ssh_agent_known_hosts: str = ""
    # Credentials: the sandbox uses them through routes, never holds them.
    # Where secrets come from: [{name, file = PATH} | {name, env = VAR} |
    # {name, git_credential = "https://host[:port]", user = "alice" (default: the session's
    # owner), home = DIR}] (agentd/credentials/).
    credential_sources: list[dict[str, Any]] = field(default_factory=list)
    # Routes the sandbox reaches as plain http on 127.0.0.1:credential_route_port/<name>/,
    # forwarded over TLS with the secret added: [{name, kind = "git" | "http", upstream =
    # "https://host/prefix/", source, header = "Authorization", scheme = "Bearer" |
    # "Basic" | "", username, ca_file, env = {VAR = "{url}..."}}].
    credential_routes: list[dict[str, Any]] = field(default_factory=list)
    # Refs a push through a git route may only update when a person says yes (fnmatch
    # patterns on full ref names); deletions and non-fast-forward updates always ask.
    credential_protected_refs: list[str] = field(
        default_factory=lambda: [
            "refs/heads/main",
            "refs/heads/master",
            "refs/heads/release/*",
            "refs/tags/*",
        ]
    )
    credential_route_port: Annotated[int, at.Ge(1), at.Le(65535)] = 3130
    # sandbox.credentials, in Claude Code's vocabulary: what a sandbox is shown in place
    # of a secret. [{name = "GITHUB_TOKEN", mode = "deny" | "mask", injectHosts =
    # ["api.github.com"], source = a credential_sources name (default: the daemon's
    # variable of that name)}] (agentd/credentials/masked_config.py).
    credential_env_vars: list[dict[str, Any]] = field(default_factory=list)
    # [{path = "/home/me/.npmrc" (where the sandbox sees it), mode, injectHosts, source,
    # from = HOST FILE (shown with the secret replaced; default: the placeholder alone)}].
    credential_files: list[dict[str, Any]] = field(default_factory=list)
    # A CA file the proxy trusts besides the system's when it verifies a host a masked
    # credential goes to (a private registry's CA); "": the system's only.
    network_upstream_ca_file: str = ""
    # The uid a root daemon's sandboxed commands run as when the session owner is root.
    sandbox_uid: Id = 65534
    sandbox_gid: Id = 65534
    # The groups a root daemon gives its sessions, one each (like /etc/subgid's
    # "first:count"): a session's commands hold its own group (supplementary), and its
    # temp dir and output files belong to root and that group, so no other session's
    # sandbox can reach them even with the same uid. No group of the host may lie in it.
    # []: sessions share their identity's group (isolated only by what is mounted).
    sandbox_gid_range: IdRange = field(default_factory=lambda: [1879113728, 65536])
    # What one session may use in all, held by its control group (cgroup v1 or v2,
    # whichever holds the memory and pids controllers here): every process of its Bash
    # calls, background tasks, hooks and searches, and the RAM-backed files they write
    # (its temp dir, each sandbox's /tmp and /dev/shm). cpu_weight is cgroup v2's scale.
    session_memory_bytes: Positive = 4 * 1024**3
    session_processes: Positive = 512
    session_cpu_weight: CpuWeight = 100
    # "auto": the hierarchy holding memory and pids; "v1" or "v2" force one; "off": no
    # groups (the per-process rlimits bash_memory_bytes and bash_processes apply then).
    session_cgroups: Literal["auto", "v1", "v2", "off"] = "auto"
    # The cgroup (a path in the hierarchy) sessions' groups are made under; "": the
    # daemon's own (under systemd, the unit's delegated cgroup).
    cgroup_parent: str = ""
    # Sizes of the RAM-backed places a session writes, each counted in its memory: its
    # temp dir ($TMPDIR and the sandbox's HOME, kept between calls; a tmpfs of its own
    # when the daemon is root; 0: a plain directory on /tmp's disk, unsized), and each
    # sandbox's own /tmp and /dev/shm.
    session_tmp_bytes: NonNegative = 1024**3
    sandbox_tmp_bytes: Positive = 1024**3
    sandbox_shm_bytes: Positive = 256 * 1024**2
    # Per process rlimits: memory and processes only where no control group holds them
    # (processes then counts every process of the sandbox uid on the host).
    bash_memory_bytes: Positive = 4 * 1024**3
    bash_processes: Positive = 512
    bash_file_size_bytes: Positive = 8 * 1024**3
    bash_open_files: Positive = 4096
    # Bytes a background task's output file may hold; older output is dropped past it.
    task_output_bytes: Positive = 64 * 1024 * 1024
    # Seconds a task may run before it is stopped.
    task_max_seconds: Seconds = 3600.0
    # How the daemon learns what a Bash call changed (agentd/changes/): "events"
    # (fanotify, needs root), "scan" (a walk of the workspace per call), or "auto"
    # (events where they work, else scan).
    changes_tracking: Literal["auto", "events", "scan"] = "auto"
    # Seconds between two checks of what a running background task changed.
    changes_check_seconds: Seconds = 2.0
    # The most one run's change log may hold (events mode). A run that causes more
    # events (a flood of renames or mode changes) loses the rest, and what it may have
    # changed is then checked by a walk of the workspace, not trusted.
    changes_log_bytes: Positive = 64 * 1024 * 1024
    # Whether each writing call's changes are kept as a checkpoint to diff, restore and
    # rewind (agentctl checkpoints|diff|restore|rewind).
    checkpoints: bool = True
    # The largest file whose content a checkpoint keeps (what each writing call
    # changed, to diff and restore); a larger one is listed "not restorable: too large".
    checkpoint_file_bytes: Positive = 64 * 1024 * 1024
    # The most one call's checkpoint adds to the store; past it, "too large".
    checkpoint_call_bytes: Positive = 256 * 1024 * 1024
    # The most paths one call's checkpoint keeps images of (a build's output of
    # 100,000 files); the rest are listed "not restorable: more than N paths changed".
    checkpoint_call_paths: Positive = 20000
    # The most one session's checkpoints add to the store; past it, "too large".
    checkpoint_session_bytes: Positive = 1024 * 1024 * 1024
    # Whether stopping the daemon stops the background tasks too (`agentd stop --tasks`
    # does it once). Off: tasks run on under their shims and the next daemon takes them
    # over; closing a session still stops its tasks.
    stop_tasks_on_exit: bool = False
    # A file holding the TCP listener's bearer token, so it need not sit in this config.
    token_file: str = ""
    # Paths under each home directory (or absolute) a sandbox may read; the rest of
    # /root, /home/* and the daemon's home is hidden. No credentials belong here.
    sandbox_home_allow: list[str] = field(
        default_factory=lambda: list(agentd_sandbox.visibility.DEFAULT_HOME_ALLOW)
    )
    # Host unix sockets a sandbox may connect to; every other one is hidden.
    sandbox_sockets: list[str] = field(default_factory=list)
    # The config file this config was read from (set by load); hidden from every sandbox.
    config_file: str = ""

    # Closed sessions' journals, output files and saved results are deleted this long
    # after they close (`agentctl session gc` can do it sooner).
    retention_seconds: Seconds = 7 * 86400.0
    # Open sessions idle this long (no call, no event) are closed; 0: never.
    session_idle_seconds: SecondsOrNever = 7 * 86400.0
    # Bytes the state may take (database, saved results, command output files); past
    # it the oldest closed sessions are deleted first, before their retention ends.
    # Open sessions are never deleted for it. 0: no cap.
    state_max_bytes: NonNegative = 10 * 1024**3
    # Seconds between two passes of the reaper (idle sessions, retention, the cap).
    reap_interval_seconds: Seconds = 300.0
    # Where each session's directories under /tmp are recorded with the state dir of the
    # daemon that made them, so the next daemon to start removes those of a daemon gone
    # for good (sessions/tmp_owners.py). The default is shared by every daemon of this
    # user on the machine, as /tmp is; a daemon with a directory of its own (a test's)
    # neither sweeps the others' records nor has its own swept by them.
    tmp_owners_dir: str = field(default_factory=default_tmp_owners_dir)

    # Log lines as text (default) or one JSON object per line ("json").
    log_format: Literal["text", "json"] = "text"
    # Prometheus metrics on this local address ("127.0.0.1:9464"); off when empty.
    metrics_listen: ListenAddress = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            setattr(self, f.name, check_setting(f.name, getattr(self, f.name)))
        if self.tcp_listen and not (
            self.tls_cert and self.tls_key and (self.token or self.token_file)
        ):
            raise ConfigError(
                "tcp_listen needs tls_cert, tls_key and token_file (or token) to be set too; "
                "`agentd tls init` makes them and prints the lines to add"
            )

    @classmethod
    def load(cls, path: str | None = None, **overrides: Any) -> Config:
        values: dict[str, Any] = {}
        origin: dict[str, str] = {}
        path = path or default_config_file()
        if path:
            try:
                with open(path, "rb") as f:
                    values.update(tomllib.load(f))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {path}: {exc}") from exc
            origin.update(dict.fromkeys(values, f"in {path}"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if "trusted_workspaces" in unknown:
            raise ConfigError(
                f"{path}: trusted_workspaces was removed (it trusted whatever a workspace's "
                "settings say); trust exact content instead: `agentctl trust approve "
                "WS/.claude/settings.json`, or trusted_settings = [{path = ..., sha256 = ...}]"
            )
        if unknown:
            raise ConfigError(f"unknown settings in {path}: {', '.join(unknown)}")
        for key, env in (("socket_path", "AGENTD_SOCKET"), ("state_dir", "AGENTD_STATE_DIR")):
            if os.environ.get(env):
                values[key] = os.environ[env]
                origin[key] = f"from ${env}"
        for key, value in overrides.items():
            if value is not None:
                values[key] = value
                origin[key] = f"from --{key.replace('_', '-')}"
        for key, value in values.items():
            values[key] = check_setting(key, value, origin.get(key, ""))
        config = cls(**values)
        config.config_file = os.path.abspath(path) if path else ""
        config.socket_path = os.path.abspath(config.socket_path)
        config.state_dir = os.path.abspath(config.state_dir)
        return config

    @property
    def db_path(self) -> str:
        return os.path.join(self.state_dir, "agentd.db")

    def session_dir(self, session_id: str) -> str:
        """Where a session keeps its task output files and saved large results."""
        return os.path.join(self.state_dir, "sessions", session_id)


@functools.cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(Config, include_extras=True)


@functools.cache
def _adapter(key: str) -> TypeAdapter[Any]:
    # strict: no "true" for a number, no number for a string, no string for a list.
    return TypeAdapter(_hints()[key], config=ConfigDict(strict=True, allow_inf_nan=False))


def check_setting(key: str, value: Any, origin: str = "") -> Any:
    """`value` checked against the type hint of setting `key`; ConfigError if it is not."""
    try:
        return _adapter(key).validate_python(value)
    except ValidationError:
        where = f" {origin}" if origin else ""
        raise ConfigError(
            f"setting {key}{where}: expected {describe(_hints()[key])}, got {_shown(value)}"
        ) from None


def describe(hint: Any) -> str:
    """A type hint in words, for an error message a person reads."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        base, *extras = args
        for extra in extras:
            if isinstance(extra, Expect):
                return extra.text
        bounds = [
            f"{op} {getattr(extra, attr)}"
            for extra in extras
            for attr, op in (("gt", ">"), ("ge", ">="))
            if hasattr(extra, attr)
        ]
        return describe(base) + (f" {' and '.join(bounds)}" if bounds else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is list:
        inner = describe(args[0]) if args else "anything"
        if args and args[0] in (str, int, float):
            return f"a list of {inner.removeprefix('a ').removeprefix('an ')}s"
        return f"a list, each item {inner}"
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
    }.get(hint, getattr(hint, "__name__", str(hint)))


def _shown(value: Any) -> str:
    kind = {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text if len(text) <= 60 else text[:57] + '...'})"
