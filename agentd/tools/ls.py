"""LS: a directory and what lies below it, as an indented tree.

What is left out, and why:
- hidden entries (names starting with '.'): tool and VCS state, rarely what is asked for;
- `__pycache__`: build output;
- the inside of `node_modules`: it is listed (so its existence shows) but not descended
  into, since it would fill the whole listing;
- symlinks: listed by name, never followed.
Shallow entries come first under the cap: the tree is walked breadth-first.

The walk runs as the session's sandbox identity, and each directory is opened from a
descriptor of the listed one with no symlink allowed anywhere on the way, so a
directory swapped for a symlink mid-walk is refused, not followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import re
import stat
from collections import deque
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.foundation.errors import PathOutsideWorkspace
from agentd.fs import access as fsaccess
from agentd.fs import identity as fsidentity
from agentd.tools.base import FileAccess, InputError, ReadOnlyTool, ToolContext, ToolResult

MAX_ENTRIES = 1000
# An ignore list past these is not a list of names to leave out: refused, since matching
# a megabyte-long glob against every entry held a CPU for seconds.
MAX_IGNORE_PATTERNS = 256
MAX_IGNORE_CHARS = 1024
SKIPPED_NAMES = frozenset({"__pycache__"})
NOT_DESCENDED = frozenset({"node_modules"})

DESCRIPTION = """\
List a directory as a tree: its files and subdirectories, recursively (directories end
with '/').

- `path`: the directory (absolute, or relative to the working directory); the working
  directory when omitted.
- `ignore`: glob patterns of entries to leave out, matched against names and against
  paths relative to the listed directory (e.g. `["*.log", "build"]`).

Hidden files, `__pycache__` and the contents of `node_modules` are left out, and at most
1000 entries are shown. To find files by name prefer Glob; to search contents, Grep."""


class LSInput(TypedDict):
    path: NotRequired[str]
    ignore: NotRequired[list[str]]


class LS(ReadOnlyTool[LSInput]):
    name: ClassVar[str] = "LS"
    description: ClassVar[str] = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "ignore": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }

    def file_access(self, args: LSInput) -> FileAccess | None:
        return FileAccess("read", args.get("path") or ".")

    async def validate_input(self, args: LSInput, ctx: ToolContext) -> None:
        ignore = args.get("ignore", [])
        if not isinstance(ignore, list) or not all(isinstance(g, str) for g in ignore):
            raise InputError("ignore must be a list of glob patterns (strings).")
        if len(ignore) > MAX_IGNORE_PATTERNS or any(len(g) > MAX_IGNORE_CHARS for g in ignore):
            raise InputError(
                f"ignore takes at most {MAX_IGNORE_PATTERNS} glob patterns of at most "
                f"{MAX_IGNORE_CHARS} characters each; list a subdirectory or use Glob instead."
            )
        # Outside the workspace: the permission check decides; call() checks again.
        with contextlib.suppress(PathOutsideWorkspace):
            _directory(args.get("path"), ctx)

    async def call(self, args: LSInput, ctx: ToolContext) -> ToolResult:
        loc = _directory(args.get("path"), ctx)
        root = loc.path
        ignore = _compile(list(args.get("ignore") or []))
        entries, truncated = await asyncio.to_thread(_walk_as, loc, ignore)

        lines = [f"- {root.rstrip('/')}/"]
        for rel, is_dir in sorted(entries, key=lambda e: e[0].split("/")):
            depth = rel.count("/")
            name = rel.rsplit("/", 1)[-1]
            lines.append("  " * (depth + 1) + f"- {name}{'/' if is_dir else ''}")
        text = "\n".join(lines)
        if truncated:
            text = (
                f"The listing stops at {MAX_ENTRIES} entries; there are more below "
                f"{root}. List a subdirectory, or use Glob or Grep to find specific files.\n\n"
                + text
            )
        data = {
            "path": root,
            "entries": [rel + ("/" if is_dir else "") for rel, is_dir in entries],
            "numEntries": len(entries),
            "truncated": truncated,
        }
        return ToolResult.text(text, data)


def _directory(raw: str | None, ctx: ToolContext) -> fsaccess.Located:
    session = ctx.session
    path = fsaccess.expand(raw, session.cwd, session.home) if raw else session.cwd
    loc = fsaccess.locate(path, ctx.roots("read"), ctx.fs_identity(), daemon_roots=(ctx.state_dir,))
    fsaccess.check_inside(loc)
    try:
        st = fsaccess.stat_beneath(loc)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(
            f"Path {path} does not exist. The current working directory is {session.cwd}."
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"Path {path} is not a directory; use Read for files.")
    return loc


def _compile(patterns: list[str]) -> list[tuple[re.Pattern[str], re.Pattern[str] | None]]:
    """Each glob as a regex, once per call (not once per entry walked): the pattern, and
    for a `**/` one the rest, matched against a bare name too."""
    out = []
    for pattern in patterns:
        bare = pattern.rstrip("/")
        rest = bare[3:] if bare.startswith("**/") else None
        out.append(
            (
                re.compile(fnmatch.translate(bare)),
                re.compile(fnmatch.translate(rest)) if rest is not None else None,
            )
        )
    return out


def _ignored(
    name: str, rel: str, patterns: list[tuple[re.Pattern[str], re.Pattern[str] | None]]
) -> bool:
    for whole, rest in patterns:
        if whole.match(name) or whole.match(rel):
            return True
        if rest is not None and rest.match(name):
            return True
    return False


def _walk_as(loc: fsaccess.Located, ignore: list[Any]) -> tuple[list[tuple[str, bool]], bool]:
    """`_walk` of the directory at `loc`, as `loc`'s identity."""
    with fsidentity.acting_as(loc.identity):
        root_fd = fsaccess.open_beneath(loc, os.O_PATH | os.O_DIRECTORY)
        try:
            return _walk(root_fd, ignore)
        finally:
            os.close(root_fd)


def _walk(root_fd: int, ignore: list[Any]) -> tuple[list[tuple[str, bool]], bool]:
    """Entries below `root_fd` as (path relative to it, is_dir), breadth-first, capped."""
    entries: list[tuple[str, bool]] = []
    queue: deque[str] = deque([""])
    while queue:
        rel_dir = queue.popleft()
        try:
            dir_fd = fsaccess.open_dir_nofollow(root_fd, rel_dir)
        except OSError:
            continue  # unreadable, swapped for a symlink, or gone since it was listed
        try:
            with os.scandir(dir_fd) as it:
                children = sorted((e.name, _is_dir(e)) for e in it)
        except OSError:
            continue
        finally:
            os.close(dir_fd)
        for name, is_dir in children:
            if name.startswith(".") or name in SKIPPED_NAMES:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if _ignored(name, rel, ignore):
                continue
            if len(entries) == MAX_ENTRIES:
                return entries, True
            entries.append((rel, is_dir))
            if is_dir and name not in NOT_DESCENDED:
                queue.append(rel)
    return entries, False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


TOOL = LS
