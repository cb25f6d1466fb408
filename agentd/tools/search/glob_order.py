"""Glob's reference semantics, apart from the search: what a pattern means, and the order.

Kept apart from glob.py (which owns running rg and stat'ing fast) so each can change alone.

The reference lists `rg --files --sort modified` (a depth-first walk in which siblings,
directories included, go oldest first, ties in directory order) sorted again, stably,
by each file's mtime. Files written in the same clock tick have equal mtimes, so that
walk order shows wherever a checkout or an archive made many files at once. `rg -j1`
walks in directory order; `walk_order` gets the reference's order from it, stat'ing
only the directories above files whose mtimes tie.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import groupby
from operator import itemgetter

# rg lists in directory order only when it walks with one thread.
ORDERED_WALK_ARGS = ("-j1",)
_GLOB_CHARS = frozenset("*?[{")


def split_pattern(pattern: str, path: str | None) -> tuple[str, str | None]:
    """(pattern, path) as the reference takes them: an empty pattern lists every file; an
    absolute pattern searches from its longest directory without glob characters (which
    replaces `path`), the rest being the pattern."""
    if not pattern:
        return "*", path
    if not os.path.isabs(pattern):
        return pattern, path
    parts = pattern.split("/")
    static = 1  # parts[0] is "" (the leading slash)
    while static < len(parts) - 1 and not _GLOB_CHARS & set(parts[static]):
        static += 1
    base = "/".join(parts[:static]) or "/"
    return "/".join(parts[static:]) or "*", base


def walk_order(found: list[tuple[int, str]], mtime_of: Callable[[str], int]) -> list[str]:
    """`found` ((mtime_ns, path) in `rg -j1` order) oldest first, ties in the reference's
    walk order. `mtime_of(dir)` is a directory's mtime (paths relative to the root)."""
    ordered = sorted(found, key=itemgetter(0))  # stable: ties stay in rg's order
    out: list[str] = []
    dir_mtimes: dict[str, int] = {}
    for mtime, run in groupby(ordered, key=itemgetter(0)):
        group = [path for _, path in run]
        if len(group) > 1 and len({p.rpartition("/")[0] for p in group}) > 1:
            group = _walk_sorted(group, mtime, dir_mtimes, mtime_of)
        out += group
    return out


def _walk_sorted(
    group: list[str], mtime: int, dir_mtimes: dict[str, int], mtime_of: Callable[[str], int]
) -> list[str]:
    """Files of equal mtime, given in directory-order walk, in mtime-sorted walk order:
    at the first level where two paths part, the older entry first, else the one rg met
    first (a directory's files come out together, so its first file stands for it)."""
    dir_keys: dict[str, tuple[tuple[int, int], ...]] = {"": ()}

    def dir_key(directory: str, index: int) -> tuple[tuple[int, int], ...]:
        key = dir_keys.get(directory)
        if key is None:
            if directory not in dir_mtimes:
                dir_mtimes[directory] = mtime_of(directory)
            parent = directory.rpartition("/")[0]
            # Met first now: its first file stands for it among its siblings.
            key = dir_key(parent, index) + ((dir_mtimes[directory], index),)
            dir_keys[directory] = key
        return key

    keys = [dir_key(p.rpartition("/")[0], i) + ((mtime, i),) for i, p in enumerate(group)]
    return [group[i] for i in sorted(range(len(group)), key=keys.__getitem__)]
