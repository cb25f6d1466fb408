"""Which files make code run later: the list in codebearing.toml, and paths matched to it.

Matching is on names only (no file is opened here): callers that can look at the
filesystem decide which directories are git directories (`GitDirs` in walk.py) and ask
`in_git_dir` for the part of a path below one.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TABLE_FILE = Path(__file__).with_name("codebearing.toml")


@dataclass(frozen=True, slots=True)
class NameRule:
    """A file or directory, at any depth, by its trailing path components."""

    parts: tuple[str, ...]  # fnmatch patterns, one per component
    whole: bool  # "/**": a directory and everything below it
    files_only: bool
    sandbox: bool  # read-only in the sandbox when it exists at a workspace root
    tool: str
    reason: str

    @property
    def pattern(self) -> str:
        return "/".join(self.parts) + ("/**" if self.whole else "")


@dataclass(frozen=True, slots=True)
class GitRule:
    """An entry of a git directory, by its path below that directory."""

    parts: tuple[str, ...]
    whole: bool
    reason: str
    exclude: tuple[str, ...] = ()  # fnmatch patterns of a last component that do not count


@dataclass(frozen=True, slots=True)
class GitConfigRule:
    """A repository config key whose value names a file, a directory or a program."""

    section: str
    subsection: str | None  # None: no subsection; "*": any
    key: str
    kind: str  # "file", "dir" or "program"
    reason: str


@dataclass(frozen=True, slots=True)
class Match:
    """A path that counts, what is held with it, and why."""

    rel: str  # the path, relative to its workspace root
    unit: str  # what is held as one: the directory of a "/**" rule, else `rel`
    reason: str
    name: str = ""  # the components that matched (".vscode", ".cargo/config.toml")


_OTHER = "git does not write this in ordinary work"


@dataclass(frozen=True, slots=True)
class GitOrdinary:
    """What git writes in ordinary work inside a git directory: it passes; the rest is held."""

    files: tuple[str, ...] = ()  # fnmatch patterns of entries at the top
    dirs: frozenset[str] = frozenset()  # directories at the top, whole
    info: frozenset[str] = frozenset()  # entries of info/
    other: str = _OTHER

    def passes(self, comps: list[str]) -> bool:
        if not comps:
            return True
        if comps[0] in self.dirs:
            return True
        if comps[0] == "info":
            return len(comps) == 1 or (len(comps) == 2 and comps[1] in self.info)
        return len(comps) == 1 and any(fnmatch.fnmatchcase(comps[0], p) for p in self.files)


class Table:
    """The list, indexed so that a walk of 100,000 names costs a set lookup per name."""

    def __init__(
        self,
        names: tuple[NameRule, ...],
        git: tuple[GitRule, ...],
        git_config: tuple[GitConfigRule, ...],
        ordinary: GitOrdinary | None = None,
    ) -> None:
        self.names = names
        self.git = git
        self.git_config = git_config
        self.ordinary = ordinary or GitOrdinary()
        # Rules whose patterns have no wildcard, by the component that must be present
        # (a directory's first, a file's last); the rest are tried one by one.
        self._whole: dict[str, list[NameRule]] = {}
        self._last: dict[str, list[NameRule]] = {}
        self._wild: list[NameRule] = []
        for rule in names:
            if any(_WILD & set(p) for p in rule.parts):
                self._wild.append(rule)
            elif rule.whole:
                self._whole.setdefault(rule.parts[0], []).append(rule)
            else:
                self._last.setdefault(rule.parts[-1], []).append(rule)

    def may_match(self, name: str) -> bool:
        """Whether an entry called `name` can match a rule at all (a walk's fast path:
        by_name only for the few names that can)."""
        return name in self._last or name in self._whole or bool(self._wild)

    def by_name(self, rel: str, *, is_dir: bool = False) -> Match | None:
        """The rule `rel` (relative to a workspace root) falls under by its names, if any."""
        comps = _components(rel)
        for i, comp in enumerate(comps):
            for rule in self._whole.get(comp, ()):
                if tuple(comps[i : i + len(rule.parts)]) == rule.parts:
                    return _whole_match(rel, comps, i, rule)
        for rule in self._last.get(comps[-1], ()) if comps else ():
            if self._tail(rule, comps, is_dir):
                return _tail_match(rel, comps, rule)
        for rule in self._wild:
            n = len(rule.parts)
            if rule.whole:
                for i in range(len(comps) - n + 1):
                    if _fits(comps[i : i + n], rule.parts):
                        return _whole_match(rel, comps, i, rule)
            elif self._tail(rule, comps, is_dir):
                return _tail_match(rel, comps, rule)
        return None

    @staticmethod
    def _tail(rule: NameRule, comps: list[str], is_dir: bool) -> bool:
        n = len(rule.parts)
        if len(comps) < n or (rule.files_only and is_dir):
            return False
        return _fits(comps[-n:], rule.parts)

    def in_git_dir(self, rel_in_git: str) -> str | None:
        """Why the path `rel_in_git` below a git directory counts, or None: a listed
        entry for its reason, what git writes in ordinary work not at all, anything
        else for `ordinary.other` (the list is inverted inside a git directory)."""
        comps = _components(rel_in_git)
        for rule in self.git:
            n = len(rule.parts)
            inside = tuple(comps[:n]) == rule.parts if rule.whole else tuple(comps) == rule.parts
            if not inside:
                continue
            if comps and any(fnmatch.fnmatchcase(comps[-1], x) for x in rule.exclude):
                return None
            return f"git: {rule.reason}"
        if self.ordinary.passes(comps):
            return None
        return f"git: {self.ordinary.other}"

    def git_entry_names(self) -> frozenset[str]:
        """First components of the git rules (config, hooks, info, objects, …)."""
        return frozenset(rule.parts[0] for rule in self.git)

    def for_file_tools(self, rel: str) -> str | None:
        """The protected name in `rel` the file tools ask about: a listed name, or any
        path inside a `.git` directory (Edit has no business in a repository's
        internals); None when it has none."""
        comps = _components(rel)
        if ".git" in comps[:-1]:
            return ".git"
        match = self.by_name(rel)
        return match.name if match is not None else None

    def sandbox_names(self) -> list[str]:
        """Paths below a workspace root shown read-only in the sandbox when they exist."""
        return ["/".join(rule.parts) for rule in self.names if rule.sandbox and not rule.files_only]

    def config_rule(self, section: str, subsection: str | None, key: str) -> GitConfigRule | None:
        """The rule for a parsed config entry (section and key lower-cased, as git does)."""
        for rule in self.git_config:
            if rule.section != section or rule.key != key:
                continue
            if rule.subsection == "*" and subsection is not None:
                return rule
            if rule.subsection is None and subsection is None:
                return rule
        return None


_WILD = frozenset("*?[")


def _components(rel: str) -> list[str]:
    return [c for c in rel.split("/") if c and c != "."]


def _fits(comps: Iterable[str], parts: tuple[str, ...]) -> bool:
    return all(fnmatch.fnmatchcase(c, p) for c, p in zip(comps, parts, strict=True))


def _whole_match(rel: str, comps: list[str], i: int, rule: NameRule) -> Match:
    n = len(rule.parts)
    return Match(rel, "/".join(comps[: i + n]), _why(rule), "/".join(comps[i : i + n]))


def _tail_match(rel: str, comps: list[str], rule: NameRule) -> Match:
    return Match(rel, rel, _why(rule), "/".join(comps[-len(rule.parts) :]))


def _why(rule: NameRule) -> str:
    return f"{rule.tool}: {rule.reason}"


def _name_rule(raw: dict[str, object]) -> NameRule:
    pattern = str(raw["pattern"])
    whole = pattern.endswith("/**")
    parts = tuple(_components(pattern.removesuffix("/**")))
    return NameRule(
        parts,
        whole,
        bool(raw.get("files_only", False)),
        bool(raw.get("sandbox", True)),
        str(raw["tool"]),
        str(raw["reason"]),
    )


def _git_rule(raw: dict[str, object]) -> GitRule:
    path = str(raw["path"])
    exclude = raw.get("except", [])
    return GitRule(
        tuple(_components(path.removesuffix("/**"))),
        path.endswith("/**"),
        str(raw["reason"]),
        tuple(str(x) for x in exclude) if isinstance(exclude, list) else (),
    )


def _config_rule(raw: dict[str, object]) -> GitConfigRule:
    # "includeIf.*.path": section includeif, any subsection, key path (git lower-cases
    # section and key, and keeps the subsection's case).
    first, _, rest = str(raw["key"]).partition(".")
    sub, _, key = rest.rpartition(".")
    return GitConfigRule(
        first.lower(), sub or None, key.lower(), str(raw["kind"]), str(raw["reason"])
    )


def parse(text: str) -> Table:
    """A Table from the TOML text of codebearing.toml."""
    data = tomllib.loads(text)
    raw = data.get("git_ordinary", {})
    ordinary = GitOrdinary(
        tuple(str(x) for x in raw.get("files", [])),
        frozenset(str(x) for x in raw.get("dirs", [])),
        frozenset(str(x) for x in raw.get("info", [])),
        str(raw.get("other", _OTHER)),
    )
    return Table(
        tuple(_name_rule(r) for r in data.get("names", [])),
        tuple(_git_rule(r) for r in data.get("git", [])),
        tuple(_config_rule(r) for r in data.get("git_config", [])),
        ordinary,
    )


@functools.cache
def table() -> Table:
    """The list agentd ships (read once)."""
    return parse(TABLE_FILE.read_text(encoding="utf-8"))
