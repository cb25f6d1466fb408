"""Glob: the files under a directory whose paths match a glob pattern, oldest first."""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

from agentd import fsaccess, fsidentity
from agentd.errors import PathOutsideWorkspace
from agentd.tools import ripgrep
from agentd.tools.base import FileAccess, InputError, ReadOnlyTool, ToolContext, ToolResult

MAX_RESULTS = 100

DESCRIPTION = """\
Find files by name with a glob pattern, in a directory and everything below it.

- `pattern`: a glob such as `**/*.py`, `src/**/*.{ts,tsx}` or `*.md`. A pattern without
  a slash matches file names at any depth; one with a slash matches paths relative to
  the searched directory.
- `path`: the directory to search (absolute, or relative to the working directory).
  Omit it to search the working directory.

Hidden files and files listed in .gitignore are included; symlinks are not followed.
Paths come back relative to the working directory, least recently modified first,
at most 100 of them. To search file contents, use Grep."""


class Glob(ReadOnlyTool):
    name: ClassVar[str] = "Glob"
    description: ClassVar[str] = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def file_access(self, args: dict[str, Any]) -> FileAccess | None:
        return FileAccess("read", args.get("path") or ".")

    async def validate_input(self, args: dict[str, Any], ctx: ToolContext) -> None:
        if not args.get("pattern"):
            raise InputError("pattern must not be empty.")
        try:
            root = ripgrep.search_root(args.get("path"), ctx)
        except PathOutsideWorkspace:
            return  # the permission check decides; call() checks again with what it granted
        if not root.is_dir:
            raise InputError(f"Path {root.path} is not a directory; Glob searches directories.")

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started = time.monotonic()
        root = ripgrep.search_root(args.get("path"), ctx)
        # Glob looks at every file, ignored or not, as the reference does.
        out = await ripgrep.run_rg(
            ["--files", "--no-ignore", "--null", "--glob", args["pattern"]],
            root.path,
            ctx.cancelled,
            sandbox=root.sandbox,
        )
        ripgrep.check_rg_failed(out)

        listed = out.stdout.decode(errors="surrogateescape").split("\0")
        found = _with_mtimes(root, listed)
        total = len(found)
        cwd = ctx.session.cwd
        if cwd.startswith(root.path.rstrip("/") + "/"):
            # Some paths show relative to the cwd and others absolute: order the shown names.
            found = sorted((m, ripgrep.display(rel, root.path, cwd)) for m, rel in found)
        else:
            # Every shown name is one prefix + rg's path, so rg's paths order alike: build
            # names only for what is shown.
            found.sort()
            found = [(m, ripgrep.display(rel, root.path, cwd)) for m, rel in found[:MAX_RESULTS]]
        filenames = [
            name.encode(errors="surrogateescape").decode(errors="replace")
            for _, name in found[:MAX_RESULTS]
        ]
        truncated = total > MAX_RESULTS or out.truncated

        if not filenames:
            text = "No files found"
        else:
            text = "\n".join(filenames)
            if truncated:
                more = f"{total - len(filenames)} more" if not out.truncated else "more"
                text += (
                    f"\n(Only the {len(filenames)} oldest of the matching files are listed; "
                    f"{more} not shown. Use a more specific path or pattern.)"
                )
        data = {
            "filenames": filenames,
            "durationMs": int((time.monotonic() - started) * 1000),
            "numFiles": len(filenames),
            "truncated": truncated,
            "totalMatches": total,
            "countIsComplete": not out.truncated,
        }
        return ToolResult.text(text, data)


def _with_mtimes(root: ripgrep.SearchRoot, listed: list[str]) -> list[tuple[int, str]]:
    """(mtime_ns, path) of each path rg listed that still exists, stat'ed from a descriptor
    of the searched directory as the session's identity."""
    found: list[tuple[int, str]] = []
    with fsidentity.acting_as(ripgrep.identity_of(root)):
        dir_fd = fsaccess.open_beneath(root.loc, os.O_PATH | os.O_DIRECTORY)
        try:
            for rel in listed:
                if not rel:
                    continue
                try:
                    found.append(
                        (os.stat(rel, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns, rel)
                    )
                except OSError:
                    continue  # gone since rg listed it
        finally:
            os.close(dir_fd)
    return found


TOOL = Glob
