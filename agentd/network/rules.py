"""Hosts by name, in Claude Code's vocabulary: `sandbox.network.allowedDomains` and
`deniedDomains` entries (`example.com`, `*.example.com` for its subdomains, either with
an optional `:port`) and `WebFetch(domain:…)` allow rules. Deny wins.

Pure data and matching: where the entries come from (config, presets, the session, the
workspace's settings through trust) is the caller's (agentd/permissions/network_rules.py).
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from agentd.network.address import literal_address


@dataclass(frozen=True, slots=True)
class DomainPattern:
    """One entry: a host (or `*.` and a parent domain), and a port or None for any."""

    text: str  # as written, for messages
    host: str
    wildcard: bool = False
    port: int | None = None

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host

    def names(self, host: str) -> bool:
        """Whether the entry names exactly this host (no wildcard): what an IP literal
        needs to be allowed."""
        return not self.wildcard and host == self.host


def normal_host(host: str) -> str:
    """A host as rules compare it: lower case, no trailing dot, no IPv6 brackets, and
    an IP literal in its one canonical spelling."""
    host = host.strip().lower().rstrip(".")
    literal = literal_address(host)
    return literal if literal is not None else host.removeprefix("[").removesuffix("]")


# A reason longer than this is cut (it is shown in a refusal, not a document).
MAX_REASON = 300


def reason_text(text: object) -> str:
    """A deny entry's reason as a refusal shows it: one line of printable text, bounded;
    "" for anything that is not a string."""
    if not isinstance(text, str):
        return ""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line[:MAX_REASON]


def parse_pattern(text: str) -> DomainPattern:
    """An allowedDomains/deniedDomains entry; ValueError saying what is wrong."""
    raw = text.strip()
    if not raw or any(c.isspace() for c in raw) or "/" in raw or "\0" in raw:
        raise ValueError(f"{text!r} is not a host name (e.g. example.com or *.example.com)")
    host, port = raw, None
    if raw.startswith("["):  # [v6]:port
        inner, _, rest = raw[1:].partition("]")
        host = inner
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                raise ValueError(f"{text!r}: the port after ] must be :NUMBER")
            port = int(rest[1:])
    elif raw.count(":") == 1:
        host, _, number = raw.partition(":")
        if not number.isdigit():
            raise ValueError(f"{text!r}: the port must be a number")
        port = int(number)
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"{text!r}: port {port} is out of range")
    wildcard = host.startswith("*.")
    host = normal_host(host.removeprefix("*.") if wildcard else host)
    if not host or "*" in host:
        raise ValueError(f"{text!r}: a wildcard is only `*.` before a domain")
    return DomainPattern(raw, host, wildcard, port)


def patterns(entries: list[str] | tuple[str, ...]) -> list[DomainPattern]:
    """Entries parsed; the ones that do not parse are dropped (the caller checked those
    it must refuse loudly, as the daemon's config)."""
    out: list[DomainPattern] = []
    for entry in entries:
        try:
            out.append(parse_pattern(entry))
        except ValueError:
            continue
    return out


@dataclass(frozen=True, slots=True)
class Sourced:
    """A pattern and where it came from ("daemon config", "preset github", a settings
    file's path, "session"), for the 403 body and the journal."""

    pattern: DomainPattern
    source: str
    # A deny entry's sentence for the refused program (sandbox-runtime's
    # deniedDomainReasons), or "".
    why: str = ""

    @property
    def shown(self) -> str:
        return f"{self.pattern.text} ({self.source})"


@dataclass(slots=True)
class NetworkRules:
    """What decides a session's connections by name."""

    allowed: list[Sourced] = field(default_factory=list)
    denied: list[Sourced] = field(default_factory=list)

    def denying(self, host: str, port: int) -> Sourced | None:
        return next((s for s in self.denied if s.pattern.matches(host, port)), None)

    def allowing(self, host: str, port: int) -> Sourced | None:
        return next((s for s in self.allowed if s.pattern.matches(host, port)), None)

    def naming(self, host: str, port: int) -> Sourced | None:
        """An allow entry naming this exact host (an IP literal needs one)."""
        return next(
            (s for s in self.allowed if s.pattern.names(host) and (s.pattern.port in (None, port))),
            None,
        )


@functools.cache
def presets() -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (description, domains), from presets.toml."""
    data = tomllib.loads(resources.files(__package__).joinpath("presets.toml").read_text())
    return {
        name: (str(body.get("description", "")), tuple(body.get("domains", ())))
        for name, body in data.items()
    }


def suggested_entry(host: str, port: int) -> str:
    """The allowedDomains entry a refusal names: the host, and its port unless it is
    the usual one for web traffic."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port in (80, 443) else f"{shown}:{port}"
