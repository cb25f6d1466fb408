"""`sandbox.credentials` in the daemon's config, in Claude Code's vocabulary, checked
at start: `credential_env_vars` and `credential_files`, entries with `mode = "deny"`
(the sandbox never sees it) or `mode = "mask"` (it sees a placeholder, replaced by the
real value on the way out to the entry's `injectHosts` only).

An entry's real value comes from a credential source (`source`, config.py's sources:
a 0600 file, the daemon's environment, the owner's `git credential fill`, a command
run as the owner); without one, a variable's comes from the daemon's environment of
the same name and a file's is the one line of the host file at `from` (default: the
entry's own path).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from agentd.credentials.config import _ENV_NAME, _RESERVED_ENV, Source
from agentd.foundation.errors import ConfigError
from agentd.network.rules import DomainPattern, parse_pattern

log = logging.getLogger(__name__)

MODES = ("deny", "mask")
# Where bwrap mounts the kernel's own trees: no entry of a workspace's covers them.
_KERNEL_TREES = ("/proc", "/sys", "/dev")


@dataclass(frozen=True, slots=True)
class MaskedEntry:
    kind: str  # "envVars" | "files"
    name: str  # the variable's name, or the file's path inside the sandbox
    mode: str  # "deny" | "mask"
    inject_hosts: tuple[DomainPattern, ...] = ()
    # Where the real value comes from (a source of credential_sources, or one made for
    # the entry: the daemon's variable, the host file).
    source: Source | None = None
    # A file's content as shown, from this host file with the secret replaced; "": the
    # placeholder alone on one line.
    template: str = ""
    # Where it was written: "daemon config", or a workspace's settings file. An entry
    # of a workspace's takes a masked variable's real value from the session's own
    # environment (what the person who made the session gave it), never the daemon's.
    origin: str = "daemon config"

    @property
    def label(self) -> str:
        """How people and refusals name it: `envVars GITHUB_TOKEN`, `files /x/.npmrc`."""
        return f"{self.kind} {self.name}"

    def injects_to(self, host: str, port: int) -> bool:
        return any(p.matches(host, port) for p in self.inject_hosts)

    @property
    def hosts(self) -> list[str]:
        return [p.text for p in self.inject_hosts]


def _fail(what: str, why: str) -> ConfigError:
    return ConfigError(f"{what}: {why}")


def _common(
    entry: Any, what: str, named: str, sources: dict[str, Source]
) -> tuple[str, str, tuple[DomainPattern, ...], Source | None]:
    if not isinstance(entry, dict):
        raise _fail(what, f'must be a table ({{{named}, mode = "deny" | "mask", injectHosts}})')
    mode = entry.get("mode", "")
    if mode not in MODES:
        raise _fail(what, 'mode must be "deny" or "mask"')
    name = entry.get(named, "")
    if not isinstance(name, str) or not name:
        raise _fail(what, f"{named} must be a non-empty string")
    hosts = entry.get("injectHosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise _fail(what, "injectHosts must be a list of host names")
    if mode == "deny" and hosts:
        raise _fail(what, 'injectHosts is for mode = "mask" only')
    try:
        patterns = tuple(parse_pattern(h) for h in hosts)
    except ValueError as exc:
        raise _fail(what, f"injectHosts: {exc}") from None
    source_name = entry.get("source", "")
    if not isinstance(source_name, str):
        raise _fail(what, "source must be the name of a credential_sources entry")
    source = None
    if source_name:
        if mode == "deny":
            raise _fail(what, 'source is for mode = "mask" only')
        if source_name not in sources:
            raise _fail(what, f"source {source_name!r} is not one of credential_sources")
        source = sources[source_name]
    return name, mode, patterns, source


def _env_var(entry: Any, index: int, sources: dict[str, Source]) -> MaskedEntry:
    what = f"credential_env_vars[{index}]"
    keys = {"name", "mode", "injectHosts", "source"}
    if isinstance(entry, dict) and (unknown := set(entry) - keys):
        raise _fail(what, f"unknown keys {sorted(unknown)}")
    name, mode, hosts, source = _common(entry, what, "name", sources)
    if not _ENV_NAME.match(name) or _RESERVED_ENV.match(name):
        raise _fail(what, f"{name!r} is not a variable a credential may be")
    if mode == "mask" and source is None:
        source = Source(f"${name}", "env", env=name)
    return MaskedEntry("envVars", name, mode, hosts, source)


def _file(entry: Any, index: int, sources: dict[str, Source]) -> MaskedEntry:
    what = f"credential_files[{index}]"
    keys = {"path", "mode", "injectHosts", "source", "from"}
    if isinstance(entry, dict) and (unknown := set(entry) - keys):
        raise _fail(what, f"unknown keys {sorted(unknown)}")
    path, mode, hosts, source = _common(entry, what, "path", sources)
    if not os.path.isabs(path) or ".." in path.split("/") or os.path.normpath(path) != path:
        raise _fail(what, "path must be a plain absolute path (where the sandbox sees it)")
    origin = entry.get("from", "")
    if not isinstance(origin, str) or (origin and not os.path.isabs(origin)):
        raise _fail(what, "from must be an absolute path on the host")
    if mode == "deny":
        return MaskedEntry("files", path, mode)
    if source is None:
        # The host file holds the secret alone: the sandbox's copy holds the placeholder.
        return MaskedEntry("files", path, mode, hosts, Source(path, "file", file=origin or path))
    return MaskedEntry("files", path, mode, hosts, source, template=origin)


def workspace_entry(kind: str, entry: dict[str, Any], path: str) -> MaskedEntry | None:
    """A workspace's sandbox.credentials entry (a "mask" one from trusted content only,
    settings.py sees to it); None, logged, for one that is not understood: a typo in a
    workspace file drops that entry only. A workspace names no source, no host file."""
    index = 0
    try:
        if kind == "envVars":
            checked = {k: v for k, v in entry.items() if k in ("name", "mode", "injectHosts")}
            parsed = _env_var(checked, index, {})
            if parsed.mode == "mask":
                # Its value is the session's: no source of the daemon's.
                parsed = MaskedEntry(parsed.kind, parsed.name, "mask", parsed.inject_hosts)
        elif kind == "files":
            parsed = _file({"path": entry.get("path"), "mode": entry.get("mode")}, index, {})
            top = "/" + parsed.name.split("/")[1]
            if top in _KERNEL_TREES or parsed.name == "/":
                log.warning("%s: a files entry may not cover %s", path, parsed.name)
                return None
            if parsed.mode != "deny":
                log.warning("%s: a workspace's files entry may only deny (%s)", path, parsed.name)
                return None
        else:
            return None
    except ConfigError as exc:
        log.warning("%s: sandbox.credentials.%s entry ignored: %s", path, kind, exc)
        return None
    return MaskedEntry(
        parsed.kind, parsed.name, parsed.mode, parsed.inject_hosts, parsed.source, origin=path
    )


def load_masked(
    env_vars: list[dict[str, Any]], files: list[dict[str, Any]], sources: dict[str, Source]
) -> list[MaskedEntry]:
    """Every entry checked; ConfigError naming the first bad one."""
    entries = [_env_var(e, i, sources) for i, e in enumerate(env_vars)]
    entries += [_file(e, i, sources) for i, e in enumerate(files)]
    seen: set[str] = set()
    for entry in entries:
        if entry.label in seen:
            where = "credential_env_vars" if entry.kind == "envVars" else "credential_files"
            raise _fail(where, f"{entry.name!r} is given twice")
        seen.add(entry.label)
    return entries
