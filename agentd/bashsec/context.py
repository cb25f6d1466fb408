"""What the classifier's tree walk carries: the run-time words it cannot see (`Dyn`),
what it has found so far (`Ctx`), the way back into the walk (`Walk`), and the program
table both halves read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from agentd.bashsec.model import SimpleCommand
from agentd.bashsec.table import load

SETTINGS, PROGRAMS = load()


class Dyn:
    """A word only known at run time. `optlike`: it could expand to an option (-x)."""

    __slots__ = ("text", "optlike")

    def __init__(self, text: str, optlike: bool = True) -> None:
        self.text = text
        self.optlike = optlike

    def __repr__(self) -> str:
        return f"Dyn({self.text!r})"


class Assigned(Dyn):
    """A NAME=VALUE argument of declare/export… whose assignment the walk already recorded."""

    __slots__ = ("name",)

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text, False)
        self.name = name


Word = str | Dyn


@dataclass(frozen=True, slots=True)
class Walk:
    """The walk's entry points (classifier.py), for the readers of a command's parts that
    meet code inside it: the text of `sh -c` (script), the command `find -exec` runs
    (argv), a substitution inside arithmetic or `[[ -v ]]` (node, word). The Ctx carries
    them, so those readers call back into the walk without importing it."""

    node: Callable[[Node, Ctx], None]
    word: Callable[[Node, Ctx], Word]
    script: Callable[[Ctx, str], None]
    argv: Callable[[Ctx, list[Word], list[int] | None, int, tuple[str, ...]], None]


class Ctx:
    """What the walk has found so far, and the walk itself."""

    __slots__ = (
        "walk", "cats", "reasons", "writes", "cds", "commands", "parse_ok", "unsafe",
        "defined", "depth", "src", "chars", "assigned", "arith_refs", "indirect", "integers",
        "repo_configured",
    )  # fmt: skip

    def __init__(self, walk: Walk) -> None:
        self.walk = walk
        self.cats: set[str] = set()
        self.reasons: list[str] = []
        self.writes: list[str] = []
        self.cds: list[str] = []
        self.commands: list[SimpleCommand] = []
        self.parse_ok = True
        self.unsafe = False
        self.defined: set[str] = set()
        self.depth = 0
        # The source being walked, as bytes (tree-sitter's offsets are byte offsets), and as
        # the same str when it is ASCII (byte offsets are then character offsets).
        self.src = b""
        self.chars: str | None = ""
        # Every assignment by any route: name -> values (a str, a Dyn, or shellvars.INT).
        self.assigned: dict[str, list[object]] = {}
        # Names whose value bash evaluates as arithmetic -> where.
        self.arith_refs: dict[str, str] = {}
        # ${!name}: name -> the expansion.
        self.indirect: dict[str, str] = {}
        # Names declared -i: every value they get is evaluated as arithmetic.
        self.integers: set[str] = set()
        # Program name -> why the workspace's own configuration decides what it does.
        self.repo_configured: dict[str, str] = {}

    def text(self, node: Node) -> str:
        """The source text of a node of the tree being walked (undecodable bytes replaced)."""
        chars = self.chars
        if chars is not None:
            return chars[node.start_byte : node.end_byte]
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def add(self, cats: frozenset[str] | set[str], reason: str) -> None:
        if cats:
            self.cats |= cats
        else:
            self.unsafe = True
        self.reasons.append(reason)

    def opaque(self, reason: str) -> None:
        self.cats.add("opaque")
        self.reasons.append(reason)

    def write(self, path: str, reason: str, destructive: bool = False) -> None:
        self.cats.add("write")
        if destructive:
            self.cats.add("destructive")
        self.writes.append(path)
        self.reasons.append(reason)


# Arguments that only print a version or help, whatever the program.
VERSION_ONLY = frozenset({"--version", "-V", "--help", "-h", "-version", "version"})


def shown(word: Word) -> str:
    """A word as a reason names it."""
    return word if isinstance(word, str) else word.text
