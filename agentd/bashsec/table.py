"""Load programs.toml into lookup structures the classifier reads.

The knowledge lives in programs.toml; this module only turns it into frozen objects with
the lookups precomputed (option letters, long-option prefixes), once per process.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

CATEGORIES = frozenset({"write", "destructive", "network", "privileged", "opaque"})
_EMPTY: frozenset[str] = frozenset()
# Checks for which a run-time argument cannot turn on anything unsafe.
# (The shell builtins' checks read their own arguments, run-time words included.)
_CHECKS_BLIND_TO_OPTIONS = frozenset(
    {"", "cd", "alias", "read", "mapfile", "printf", "getopts", "let", "test", "wait",
     "unset", "declare", "set"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Wrapper:
    """How a program that runs another command finds that command."""

    skip: int = 0
    default: str = ""
    stdin_args: bool = False


@dataclass(frozen=True, slots=True)
class Spec:
    """What the table says about one program or subcommand."""

    name: str
    categories: frozenset[str] = _EMPTY
    ask: str = ""
    options: dict[str, frozenset[str]] = field(default_factory=dict)
    long_options: tuple[tuple[str, frozenset[str]], ...] = ()
    single_dash: bool = False
    value_opts: frozenset[str] = _EMPTY
    long_value_opts: tuple[str, ...] = ()
    write_value: frozenset[str] = _EMPTY
    writes: str = ""
    operands: frozenset[str] = _EMPTY
    list_opts: frozenset[str] = _EMPTY
    operand_patterns: tuple[tuple[str, frozenset[str]], ...] = ()
    sub: dict[str, Spec] | None = None
    nosub: frozenset[str] | None = None
    prefix_words: int = 0
    check: str = ""
    wrapper: Wrapper | None = None
    # True when a run-time argument could turn on something unsafe.
    risky: bool = False
    # strict: a long option that is not in the table makes the command not read-only.
    strict: bool = False
    known: frozenset[str] = _EMPTY
    # Why the workspace's configuration decides what this program runs ("" if it does not).
    repo_config: str = ""
    # True when no argument can change the verdict (cat, ls, echo…): no option or operand
    # rule, no check, nothing run-time words could turn on.
    inert: bool = False


@dataclass(frozen=True, slots=True)
class Settings:
    max_length: int
    max_depth: int
    system_dirs: frozenset[str]
    harmless_targets: frozenset[str]
    unsafe_env: frozenset[str]
    unsafe_env_prefixes: tuple[str, ...]
    safe_env: frozenset[str]
    path_vars: frozenset[str]
    shells: frozenset[str]


def _cats(value: str | list[str]) -> frozenset[str]:
    cats = frozenset([value] if isinstance(value, str) else value)
    unknown = cats - CATEGORIES
    if unknown:
        raise ValueError(f"programs.toml: unknown categories {sorted(unknown)}")
    return cats


def _inherit(raw: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """A subcommand's entry with the options every subcommand of its program shares."""
    if not shared:
        return raw
    out = dict(raw)
    out["options"] = {**shared.get("options", {}), **raw.get("options", {})}
    for key in ("value_opts", "write_value", "known"):
        out[key] = [*shared.get(key, ()), *raw.get(key, ())]
    if "strict" in shared:
        out.setdefault("strict", shared["strict"])
    out["sub_shared"] = shared
    return out


def _spec(name: str, raw: dict[str, Any], base: frozenset[str], check: str = "") -> Spec:
    shared = raw.get("sub_shared", {})
    if shared and "sub_shared" not in raw.get("_inherited", ()):
        # What every subcommand shares, the program's own options before one share too.
        raw = {**_inherit(raw, shared), "_inherited": ("sub_shared",)}
    options = {opt: _cats(c) for opt, c in raw.get("options", {}).items()}
    value_opts = frozenset(raw.get("value_opts", ()))
    sub = raw.get("sub")
    wrapper = raw.get("wrapper")
    check = raw.get("check", check)
    nosub = raw.get("nosub")
    return Spec(
        name=name,
        categories=base | _cats(raw.get("categories", [])),
        ask=raw.get("ask", ""),
        options=options,
        long_options=tuple((o, c) for o, c in options.items() if o.startswith("--") and c),
        single_dash=raw.get("style") == "single",
        value_opts=value_opts,
        long_value_opts=tuple(o for o in value_opts if o.startswith("--")),
        write_value=frozenset(raw.get("write_value", ())),
        writes=raw.get("writes", ""),
        operands=_cats(raw.get("operands", [])),
        list_opts=frozenset(raw.get("list_opts", ())),
        operand_patterns=tuple((k, _cats(v)) for k, v in raw.get("operand_patterns", {}).items()),
        sub=(
            {k: _spec(f"{name} {k}", _inherit(v, shared), _EMPTY) for k, v in sub.items()}
            if sub is not None
            else None
        ),
        nosub=None if nosub is None else _cats(nosub),
        prefix_words=raw.get("prefix_words", 0),
        check=check,
        wrapper=Wrapper(**wrapper) if wrapper is not None else None,
        strict=raw.get("strict", False),
        known=frozenset(raw.get("known", ())),
        repo_config=raw.get("repo_config", ""),
        risky=(
            check not in _CHECKS_BLIND_TO_OPTIONS
            or any(options.values())
            or bool(raw.get("operand_patterns"))
        ),
    )


def _inert(spec: Spec) -> bool:
    return not (
        spec.sub is not None
        or spec.risky
        or spec.strict
        or spec.check
        or spec.writes
        or spec.operands
        or spec.operand_patterns
        or spec.prefix_words
        or spec.wrapper is not None
        or any(spec.options.values())
    )


@lru_cache(maxsize=1)
def load() -> tuple[Settings, dict[str, Spec]]:
    """Parse programs.toml once: (settings, program name -> Spec)."""
    text = resources.files(__package__).joinpath("programs.toml").read_text("utf-8")
    data = tomllib.loads(text)
    lists = data["lists"]
    raw_settings = data["settings"]
    base: dict[str, set[str]] = {}
    checks: dict[str, str] = {}
    for name in lists["read_only"]:
        base.setdefault(name, set())
    for cat in ("write", "destructive", "network", "privileged", "opaque"):
        for name in lists[cat]:
            base.setdefault(name, set()).add(cat)
    asks = set(lists["ask"])
    for name in asks:
        base.setdefault(name, set())
    for name in lists["version_only_ok"]:
        base[name] = set()
        checks[name] = "interpreter"
    for name in lists["shells"]:
        base[name] = set()
        checks[name] = "shell"

    programs: dict[str, Spec] = {}
    entries: dict[str, dict[str, Any]] = dict(data.get("programs", {}))
    for raw in list(entries.values()):
        for alias in raw.get("also", ()):
            entries[alias] = raw
    for name in set(base) | set(entries):
        raw = dict(entries.get(name, {}))
        if name in asks:
            raw.setdefault("ask", f"{name} can run commands from inside (shell escapes)")
        spec = _spec(name, raw, _cats(sorted(base.get(name, ()))), checks.get(name, ""))
        programs[name] = dataclasses.replace(spec, inert=_inert(spec))

    settings = Settings(
        max_length=raw_settings["max_length"],
        max_depth=raw_settings["max_depth"],
        system_dirs=frozenset(raw_settings["system_dirs"]),
        harmless_targets=frozenset(raw_settings["harmless_targets"]),
        unsafe_env=frozenset(raw_settings["unsafe_env"]),
        unsafe_env_prefixes=tuple(raw_settings["unsafe_env_prefixes"]),
        safe_env=frozenset(raw_settings.get("safe_env", ())),
        path_vars=frozenset(raw_settings["path_vars"]),
        shells=frozenset(lists["shells"]),
    )
    return settings, programs
