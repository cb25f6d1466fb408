"""Grep: search file contents with ripgrep; list files, matching lines, or counts."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any, ClassVar, NotRequired, TypedDict

from agentd.foundation.errors import PathOutsideWorkspace
from agentd.fs import identity as fsidentity
from agentd.tools.base import FileAccess, InputError, ReadOnlyTool, ToolContext, ToolResult
from agentd.tools.search import ripgrep

DEFAULT_HEAD_LIMIT = 250
# Longer lines are replaced by rg's "[Omitted long matching line]".
MAX_COLUMNS = 500
MODES = ("content", "files_with_matches", "count")
_NUMBERED = re.compile(r"(\d+)([:-])(.*)", re.S)

DESCRIPTION = """\
Search file contents with a regular expression (ripgrep syntax), in a file or a directory
tree. Prefer this to running grep or rg through Bash.

- `pattern`: the regex, e.g. `def \\w+\\(`, `TODO|FIXME`. Braces and other regex
  characters must be escaped to be matched literally (`interface\\{\\}`).
- `path`: file or directory to search; the working directory when omitted.
- `glob` (e.g. `*.py`, `*.{ts,tsx}`) or `type` (e.g. `py`, `js`, `rust`) limit the files.
- `output_mode`: `files_with_matches` (default) lists matching files, most recently
  modified first; `content` shows matching lines as `path:line:text`; `count` shows
  matching lines per file as `path:N`.
- content mode only: `-n` line numbers (default true), `-A`/`-B`/`-C` (or `context`)
  lines of context, `-o` only the matched parts.
- `-i`: case-insensitive. `multiline`: let `.` and the pattern span lines.
- `head_limit`/`offset`: page through results (lines, files or count entries); the
  default limit is 250 and 0 means no limit.

Hidden files are searched; files ignored by .gitignore in a git repository are not."""


# Functional form: some of its keys are ripgrep's flags ("-n", "-A").
GrepInput = TypedDict(
    "GrepInput",
    {
        "pattern": str,
        "path": NotRequired[str],
        "glob": NotRequired[str],
        "output_mode": NotRequired[str],
        "-B": NotRequired[float],
        "-A": NotRequired[float],
        "-C": NotRequired[float],
        "context": NotRequired[float],
        "-n": NotRequired[bool],
        "-i": NotRequired[bool],
        "-o": NotRequired[bool],
        "type": NotRequired[str],
        "head_limit": NotRequired[float],
        "offset": NotRequired[float],
        "multiline": NotRequired[bool],
    },
)


class Grep(ReadOnlyTool[GrepInput]):
    name: ClassVar[str] = "Grep"
    description: ClassVar[str] = DESCRIPTION
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "glob": {"type": "string"},
            "output_mode": {"type": "string", "enum": list(MODES)},
            "-B": {"type": "number"},
            "-A": {"type": "number"},
            "-C": {"type": "number"},
            "context": {"type": "number"},
            "-n": {"type": "boolean"},
            "-i": {"type": "boolean"},
            "-o": {"type": "boolean"},
            "type": {"type": "string"},
            "head_limit": {"type": "number"},
            "offset": {"type": "number"},
            "multiline": {"type": "boolean"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def file_access(self, args: GrepInput) -> FileAccess | None:
        return FileAccess("read", args.get("path") or ".")

    async def validate_input(self, args: GrepInput, ctx: ToolContext) -> None:
        # An empty pattern matches every line, as in the reference.
        if not isinstance(args.get("pattern"), str):
            raise InputError("pattern must be a string.")
        mode = args.get("output_mode", "files_with_matches")
        if mode not in MODES:
            raise InputError(f"output_mode must be one of {', '.join(MODES)}; got {mode!r}.")
        for key in ("-A", "-B", "-C", "context", "head_limit", "offset"):
            _count_arg(args, key)
        # Outside the workspace: the permission check decides; call() checks again.
        with contextlib.suppress(PathOutsideWorkspace):
            ripgrep.search_root(args.get("path"), ctx)

    async def call(self, args: GrepInput, ctx: ToolContext) -> ToolResult:
        root = ripgrep.search_root(args.get("path"), ctx)
        mode = args.get("output_mode", "files_with_matches")
        run_dir = root.path if root.is_dir else os.path.dirname(root.path)

        rg_args = _rg_args(args, mode)
        if not root.is_dir:
            rg_args += ["--", os.path.basename(root.path)]
        out = await ripgrep.run_rg(rg_args, run_dir, ctx.cancelled, sandbox=root.sandbox)
        if _newline_refused(out) and not args.get("multiline"):
            # A line never holds a line break: no match, as in the reference (rg refuses).
            out = dataclasses.replace(out, stdout=b"", stderr="", returncode=1)
        ripgrep.check_rg_failed(out)
        text_out = out.stdout.decode(errors="replace")
        cwd = ctx.session.cwd

        def shown(rel: str) -> str:
            return ripgrep.display(rel, run_dir, cwd)

        limit = _count_arg(args, "head_limit")
        offset = _count_arg(args, "offset") or 0
        why = (
            f"took longer than {ripgrep.MAX_SECONDS:g} s"
            if out.timed_out
            else f"printed more than {ripgrep.MAX_OUTPUT_BYTES // (1024 * 1024)} MB"
        )
        cut_note = (
            f"\n\n(The search {why} and was stopped; results are incomplete. "
            "Narrow the pattern, path, glob or type.)"
            if out.truncated
            else ""
        )

        if mode == "files_with_matches":
            files = [shown(rel) for rel in text_out.split("\0") if rel]
            with fsidentity.acting_as(ripgrep.identity_of(root)):
                files.sort(key=lambda name: (-_mtime(os.path.join(cwd, name)), name))
            page, applied_limit = _paginate(files, limit, offset)
            info = _limit_info(applied_limit, offset)
            if page:
                noun = "file" if len(page) == 1 else "files"
                head = f"Found {len(page)} {noun}" + (f" {info}" if info else "")
                text = head + "\n" + "\n".join(page)
            else:
                text = "No files found"
            data: dict[str, Any] = {
                "mode": mode,
                "filenames": page,
                "numFiles": len(page),
                "totalFiles": len(files),
            }
            return ToolResult.text(text + cut_note, _with_paging(data, applied_limit, offset))

        lines = [line for line in text_out.split("\n") if line]
        if mode == "count":
            entries: list[str] = []
            total_matches = 0
            for line in lines:
                rel, _, number = line.partition("\0")
                total_matches += int(number or 0)
                entries.append(f"{shown(rel)}:{number}")
            page, applied_limit = _paginate(entries, limit, offset)
            info = _limit_info(applied_limit, offset)
            content = "\n".join(page)
            occ = "occurrence" if total_matches == 1 else "occurrences"
            noun = "file" if len(entries) == 1 else "files"
            text = (
                (content or "No matches found")
                + f"\n\nFound {total_matches} total {occ} across {len(entries)} {noun}."
                + (f" with pagination = {info}" if info else "")
            )
            data = {
                "mode": mode,
                "numFiles": len(entries),
                "filenames": [],
                "content": content,
                "numMatches": total_matches,
            }
            return ToolResult.text(text + cut_note, _with_paging(data, applied_limit, offset))

        show_numbers = args.get("-n", True)
        formatted = [_content_line(line, shown, show_numbers) for line in lines]
        page, applied_limit = _paginate(formatted, limit, offset)
        info = _limit_info(applied_limit, offset)
        content = "\n".join(page)
        text = content or "No matches found"
        if info:
            text += f"\n\n[Showing results with pagination = {info}]"
        data = {
            "mode": mode,
            "numFiles": 0,
            "filenames": [],
            "content": content,
            "numLines": len(page),
            "totalLines": len(formatted),
        }
        return ToolResult.text(text + cut_note, _with_paging(data, applied_limit, offset))


def _newline_refused(out: ripgrep.RgOutput) -> bool:
    """rg refused a pattern that matches a line break (a literal one, or \\n) outside
    multiline mode."""
    return (
        out.returncode == 2
        and not out.stdout
        and "is not allowed in a regex" in out.stderr
        and "\\n" in out.stderr
    )


def _rg_args(args: GrepInput, mode: str) -> list[str]:
    rg = ["--max-columns", str(MAX_COLUMNS)]
    if args.get("-i"):
        rg.append("-i")
    if args.get("multiline"):
        rg += ["-U", "--multiline-dotall"]
    if args.get("type"):
        rg += ["--type", args["type"]]
    for pattern in _split_globs(args.get("glob") or ""):
        rg += ["--glob", pattern]
    if mode == "files_with_matches":
        rg += ["--files-with-matches", "--null"]
    elif mode == "count":
        # Always name the file, even when one file is searched, as the reference does.
        rg += ["--count", "--with-filename", "--null", "--sort", "path"]
    else:
        # Numbers always: the ':'/'-' after them tells match lines from context lines,
        # then they are dropped when the caller asked for -n false.
        rg += ["--line-number", "--null", "--sort", "path"]
        if args.get("-o"):
            rg.append("--only-matching")
        context = _count_arg(args, "context")
        if context is None:
            context = _count_arg(args, "-C")
        if context is not None:
            rg += ["--context", str(context)]
        else:
            for key in ("-B", "-A"):
                value = _count_arg(args, key)
                if value is not None:
                    rg += [key, str(value)]
    # -e keeps a pattern that starts with '-' from being read as a flag.
    rg += ["-e", args["pattern"]]
    return rg


def _split_globs(raw: str) -> list[str]:
    """`*.py *.md` or `*.py,*.md` are several globs; `*.{ts,tsx}` is one."""
    globs: list[str] = []
    for word in raw.split():
        if "{" in word and "}" in word:
            globs.append(word)
        else:
            globs += [g for g in word.split(",") if g]
    return globs


def _content_line(line: str, shown: Any, show_numbers: bool) -> str:
    """Re-render an rg line (`path\\0N:text`, `N-text`, `--`) with the session's paths."""
    path, sep_nul, rest = line.partition("\0")
    if not sep_nul:
        path, rest = "", line
    match = _NUMBERED.match(rest)
    if match is None:  # the `--` between groups of context
        return rest
    number, sep, text = match.groups()
    prefix = f"{shown(path)}{sep}" if path else ""
    return f"{prefix}{number}{sep}{text}" if show_numbers else f"{prefix}{text}"


def _count_arg(args: GrepInput, key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InputError(f"{key} must be a whole number; got {value!r}.")
    if value < 0:
        raise InputError(f"{key} must not be negative; got {value!r}.")
    return int(value)


def _paginate(items: list[str], limit: int | None, offset: int) -> tuple[list[str], int | None]:
    """The page of `items` and the limit that cut it (None when nothing was cut off)."""
    if limit == 0:
        return items[offset:], None
    effective = DEFAULT_HEAD_LIMIT if limit is None else limit
    page = items[offset : offset + effective]
    return page, effective if len(items) - offset > effective else None


def _limit_info(applied_limit: int | None, offset: int) -> str:
    parts = []
    if applied_limit is not None:
        parts.append(f"limit: {applied_limit}")
    if offset:
        parts.append(f"offset: {offset}")
    return ", ".join(parts)


def _with_paging(data: dict[str, Any], applied_limit: int | None, offset: int) -> dict[str, Any]:
    if applied_limit is not None:
        data["appliedLimit"] = applied_limit
    if offset:
        data["appliedOffset"] = offset
    return data


def _mtime(path: str) -> int:
    try:
        return os.lstat(path).st_mtime_ns
    except OSError:
        return 0


TOOL = Grep
