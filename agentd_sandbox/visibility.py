"""What of the host the sandbox may see: homes, unix sockets, credentials.

A sandboxed command reads the host through a read-only view of `/`, so everything a
credential or an endpoint could hide in must be covered: the home directories are
replaced by empty tmpfs mounts with a short read-only allow-list shown again (new
secret files stay hidden without anyone listing them), `/run` (D-Bus, docker.sock,
/run/user/*) is replaced too, and every other host unix socket the kernel knows of
(`/proc/net/unix`) gets /dev/null bound over it unless a setting names it.
"""

from __future__ import annotations

import contextlib
import os
import stat

from .identity import Identity, can_reach, home_of, may_search

# Paths under a home a toolchain needs, shown read-only; nothing that holds a credential
# (.npmrc, .pypirc, .git-credentials, .config/gh, .cargo/credentials*, .m2/settings.xml,
# .gradle/gradle.properties, .config/pip stay hidden).
DEFAULT_HOME_ALLOW: tuple[str, ...] = (
    ".gitconfig", ".config/git/config", ".config/git/ignore", ".config/git/attributes",
    ".cargo/bin", ".cargo/registry", ".cargo/git", ".rustup", ".pyenv", ".local/bin",
    ".nvm", ".npm/_cacache", ".cache/pip", "go/bin", "go/pkg/mod", ".m2/repository",
    ".gradle/caches", ".gradle/wrapper",
)  # fmt: skip
# Credentials hidden even where a home is visible (a workspace that is a home directory,
# an allow-listed directory that holds one).
SECRET_HOME_ENTRIES: tuple[str, ...] = (
    ".ssh", ".aws", ".config/gcloud", ".netrc", ".docker", ".kube", ".gnupg",
    ".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub", ".npmrc",
    ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".config/pip",
    ".m2/settings.xml", ".gradle/gradle.properties", ".vault-token", ".azure",
    ".terraform.d", ".config/agentd", ".docker/config.json",
)  # fmt: skip
SECRET_PATHS: tuple[str, ...] = ("/etc/shadow", "/etc/gshadow")
# Where host endpoints live; replaced by an empty tmpfs.
ENDPOINT_DIRS: tuple[str, ...] = ("/run", "/var/run")
# A passwd home equal to one of these is never hidden whole.
_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/sbin", "/srv",
     "/sys", "/tmp", "/usr", "/var", "/var/lib", "/var/tmp", "/nonexistent"}
)  # fmt: skip
# Files outside the hidden dirs whose real path may point into one (systemd-resolved).
KEEP_TARGETS: tuple[str, ...] = ("/etc/resolv.conf",)


def under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def home_dirs(identity: Identity) -> list[str]:
    """Existing real directories that hold homes: /root, /home, and the passwd homes of
    the daemon and of the sandbox identity where they live elsewhere."""
    candidates = ["/root", "/home", os.path.expanduser("~")]
    for uid in (os.geteuid(), identity.uid):
        home = home_of(uid)
        if home:
            candidates.append(home)
    found: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if real in _SYSTEM_DIRS or not os.path.isdir(real):
            continue
        if not _can_enter(real, identity):
            continue  # closed to the identity already (root's 0700 /root): no mount needed
        if any(under(real, f) for f in found):
            continue
        found = [f for f in found if not under(f, real)] + [real]
    return sorted(found)


def _can_enter(directory: str, identity: Identity) -> bool:
    """Whether `identity` may look names up in `directory` (and reach it)."""
    if not identity.switch:
        return os.access(directory, os.X_OK)
    try:
        st = os.stat(directory)
    except OSError:
        return False
    return may_search(st, identity) and can_reach(directory, identity)


def user_homes(identity: Identity, dirs: list[str] | None = None) -> list[str]:
    """Every individual home to look for allowed and secret entries in; `dirs` is
    home_dirs(identity) when the caller has it already (one sandbox's start)."""
    homes = set(home_dirs(identity) if dirs is None else dirs) - {"/home"}
    with contextlib.suppress(OSError):
        homes.update(os.path.join("/home", e) for e in os.listdir("/home"))
    for uid in (os.geteuid(), identity.uid):
        home = home_of(uid)
        if home and os.path.isdir(home):
            homes.add(os.path.realpath(home))
    return sorted(h for h in homes if os.path.isdir(h))


def endpoint_dirs() -> list[str]:
    found: list[str] = []
    for path in ENDPOINT_DIRS:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def allowed_home_paths(
    identity: Identity, allow: list[str] | tuple[str, ...], homes: list[str] | None = None
) -> list[str]:
    """Existing paths of the allow-list (relative entries in every home, absolute ones as
    they are) that `identity` can reach; `homes` is user_homes(identity) if given."""
    homes = user_homes(identity) if homes is None else homes
    candidates = [e for e in allow if os.path.isabs(e)]
    candidates += [os.path.join(h, e) for h in homes for e in allow if not os.path.isabs(e)]
    secrets = [os.path.join(h, e) for h in homes for e in SECRET_HOME_ENTRIES]
    found: list[str] = []
    for path in candidates:
        if path in found or not os.path.lexists(path) or not can_reach(path, identity):
            continue
        # bwrap binds what a symlink points to: never let an allowed name show a secret.
        real = os.path.realpath(path)
        if any(under(real, s) or under(s, real) for s in secrets):
            continue
        found.append(path)
    return found


def secret_paths(identity: Identity, extra: list[str], homes: list[str] | None = None) -> list[str]:
    """Existing real paths to hide: credentials in every home, plus `extra`; `homes` is
    user_homes(identity) if given."""
    homes = user_homes(identity) if homes is None else homes
    candidates = [os.path.join(h, e) for h in homes for e in SECRET_HOME_ENTRIES]
    candidates += [*SECRET_PATHS, *extra]
    found: list[str] = []
    for path in candidates:
        if not os.path.lexists(path):
            continue  # most are absent: skip the costlier realpath
        real = os.path.realpath(path)
        # A path the sandbox identity cannot reach is closed to it already, and bwrap
        # (running as that identity) could not mount over it.
        if real not in found and os.path.exists(real) and can_reach(real, identity):
            found.append(real)
    return found


def host_sockets() -> list[str]:
    """Paths of the unix sockets bound in this network namespace (from /proc/net/unix)."""
    found: list[str] = []
    try:
        with open("/proc/net/unix") as f:
            next(f, None)
            for line in f:
                fields = line.split(maxsplit=7)
                if len(fields) == 8 and fields[7].startswith("/"):
                    path = fields[7].rstrip("\n")
                    if path not in found:
                        found.append(path)
    except OSError:
        pass
    return found


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def kept_targets(hidden_dirs: list[str]) -> list[str]:
    """Real paths inside hidden dirs that system files point to and must keep working."""
    found = []
    for path in KEEP_TARGETS:
        real = os.path.realpath(path)
        if real != path and any(under(real, d) for d in hidden_dirs) and os.path.isfile(real):
            found.append(real)
    return found


# Where cgroup hierarchies are usually mounted: covered whenever it exists.
CGROUP_DIR = "/sys/fs/cgroup"


def cgroup_mounts() -> list[str]:
    """The fewest directories that cover every cgroup (v1 or v2) mount of the host, for
    one empty tmpfs each: /sys/fs/cgroup, and any hierarchy mounted elsewhere."""
    from .cgroups.hierarchy import mount_points

    points = sorted({*mount_points(), *([CGROUP_DIR] if os.path.isdir(CGROUP_DIR) else [])})
    covering: list[str] = []
    for path in points:
        if not any(under(path, kept) for kept in covering):
            covering.append(path)
    return covering
