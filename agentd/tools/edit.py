"""Edit: replace an exact string in a file the session has read, atomically."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from agentd.foundation.errors import InputError
from agentd.fs import access as fsaccess
from agentd.sessions.session import Session
from agentd.tools.base import FileAccess, Hints, Tool, ToolContext, ToolResult
from agentd.tools.files import filestate, recorded, textdiff, trailing

CURRENT_NOTE = "(your view of the file is current; there is no need to Read it again)"
STALE_NOTE = (
    "<system-reminder>Note: the file had changed on disk since you last read it. The edit "
    "matched and was applied to its current content, but that content has changes you have "
    "not seen: Read it before edits that depend on the surrounding text.</system-reminder>"
)

_CURLY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _straight(text: str) -> str:
    return text.translate(_CURLY)


def find_actual(content: str, old: str) -> str | None:
    """The text in `content` that `old` means: itself, or with the file's curly quotes.

    Models type straight quotes; files often hold ‘’“”. The mapping is one character to
    one, so a match in the straightened content has the same span in the real content.
    """
    if old in content:
        return old
    index = _straight(content).find(_straight(old))
    if index < 0:
        return None
    return content[index : index + len(old)]


def _curl(new: str, actual: str, old: str) -> str:
    """`new` in the quote style the file used where `old` matched (`actual`)."""
    if actual == old:
        return new
    out = list(new)
    doubles = "\u201c" in actual or "\u201d" in actual
    singles = "\u2018" in actual or "\u2019" in actual
    for i, ch in enumerate(new):
        before = new[i - 1] if i else ""
        after = new[i + 1] if i + 1 < len(new) else ""
        opening = before == "" or before.isspace() or before in "([{\u2014\u2013-"
        if ch == '"' and doubles:
            out[i] = "\u201c" if opening else "\u201d"
        elif ch == "'" and singles:
            # An apostrophe inside a word (don't) is a right quote too.
            inside_word = before.isalnum() and after.isalnum()
            out[i] = "\u2018" if opening and not inside_word else "\u2019"
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Applied:
    content: str
    old: str  # as it matched in the file
    new: str  # as written to the file


def apply_edit(content: str, old: str, new: str, replace_all: bool) -> Applied:
    """`content` with `old` replaced by `new`; InputError unless `old` matches as required."""
    if old == "":
        if content != "":
            raise InputError(
                "old_string is empty, which only creates a file or fills an empty one, and "
                "this file has content. Give the text to replace in old_string."
            )
        return Applied(new, "", new)
    actual = find_actual(content, old)
    if actual is None:
        raise InputError(
            "old_string was not found in the file. It must match the file exactly, "
            "whitespace and indentation included; Read the file to see its current text.\n"
            f"old_string: {old}"
        )
    count = content.count(actual)
    if count > 1 and not replace_all:
        raise InputError(
            f"old_string matches {count} places in the file, and replace_all is false. "
            "Set replace_all to true to change every one, or add surrounding lines to "
            "old_string so that it matches exactly one.\n"
            f"old_string: {old}"
        )
    replacement = _curl(new, actual, old)
    if replace_all:
        return Applied(content.replace(actual, replacement), actual, replacement)
    return Applied(content.replace(actual, replacement, 1), actual, replacement)


@dataclass(slots=True)
class Target:
    """A file about to be edited: where it is, its text, and how to write the text back."""

    loc: fsaccess.Located
    content: str  # "" for a file that does not exist yet
    codec: filestate.TextCodec
    exists: bool
    stale: bool  # changed on disk since the session's last Read
    current: filestate.Current | None = None  # what a write overwrites (its checkpoint)


async def load_target(
    session: Session,
    file_path: str,
    creating: bool,
    roots: list[str],
    ctx: ToolContext | None = None,
) -> Target:
    """The file to edit, checked: read first, editable text, not a notebook.

    A missing file is fine only when `creating` (the edit has an empty old_string).
    """
    loc = filestate.resolve(session, file_path, roots, ctx)
    try:
        current = await asyncio.to_thread(filestate.read_current, loc, filestate.MAX_EDIT_BYTES)
    except IsADirectoryError:
        raise InputError(f"{loc.path} is a directory; give the path of a file.") from None
    if current is None:
        if not creating:
            raise InputError(filestate.not_found(loc.path, session, loc.identity))
        return Target(loc, "", filestate.UTF8, exists=False, stale=False)
    if os.path.splitext(loc.path)[1].lower() == ".ipynb":
        raise InputError("This is a Jupyter notebook: change its cells with NotebookEdit.")
    filestate.require_read(session, loc.path)
    stale = filestate.is_modified(session, loc.path, current)
    if filestate.has_nul(current.data):
        filestate.refuse_nul(loc.path)
    content, codec = filestate.decode(current.data)
    return Target(loc, content, codec, exists=True, stale=stale, current=current)


async def save_target(ctx: ToolContext, target: Target, content: str, tool_name: str) -> None:
    data = target.codec.encode(content)
    await recorded.write(ctx, tool_name, target.loc, data, target.current)
    filestate.remember_written(ctx.session, target.loc, data)


class EditInput(TypedDict):
    file_path: str
    old_string: str
    new_string: str
    replace_all: NotRequired[bool]


class EditTool(Tool[EditInput]):
    name = "Edit"
    hints = Hints()  # changes what is there; a repeat finds other text
    description = (
        "Replace exact text in a file. old_string must match the file exactly (indentation "
        "included; line-number prefixes from Read are not part of the file) and exactly once, "
        "unless replace_all is true, which replaces every occurrence. new_string must differ.\n"
        "- The file must have been Read in this session first. If it changed on disk since, "
        "the edit still applies to its current content when old_string matches, and the "
        "result says so.\n"
        "- Straight quotes in old_string also match curly quotes in the file; the file's "
        "quote style, encoding and line endings are kept. Whitespace at the end of "
        "new_string's lines is removed, except in Markdown (.md, .mdx) files.\n"
        "- An empty old_string creates a file that does not exist yet.\n"
        "- Use NotebookEdit for .ipynb files; for several changes to one file, MultiEdit."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"default": False, "type": "boolean"},
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def file_access(self, args: EditInput) -> FileAccess | None:
        return FileAccess("write", args["file_path"])

    async def validate_input(self, args: EditInput, ctx: ToolContext) -> None:
        if args["old_string"] == args["new_string"]:
            raise InputError(
                "old_string and new_string are identical, so there is nothing to change."
            )

    async def call(self, args: EditInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        old = args["old_string"]
        replace_all = bool(args.get("replace_all", False))
        target = await load_target(
            session, args["file_path"], creating=old == "", roots=ctx.roots("write"), ctx=ctx
        )
        new = new_string(args["file_path"], old, args["new_string"], target)
        old_n = old.replace("\r\n", "\n") if target.codec.crlf else old
        new_n = new.replace("\r\n", "\n") if target.codec.crlf else new
        applied = apply_edit(target.content, old_n, new_n, replace_all)
        await save_target(ctx, target, applied.content, self.name)
        path = target.loc.path
        if replace_all:
            text = f"Updated {path}: every occurrence was replaced {CURRENT_NOTE}."
        else:
            text = f"Updated {path} {CURRENT_NOTE}."
        data: dict[str, Any] = {
            "filePath": args["file_path"],
            "oldString": applied.old,
            "newString": new,
            "originalFile": target.content,
            textdiff.PATCH_KEY: [],
            "userModified": False,
            "replaceAll": replace_all,
        }
        return await edit_result(ctx, text, data, target, applied.content)


def new_string(file_path: str, old: str, new: str, target: Target) -> str:
    """`new` as it goes into the file: line-end whitespace trimmed as the reference trims
    it (trailing.py), in a file that exists; InputError if that leaves no change."""
    if not target.exists:
        return new
    new = trailing.as_written(file_path, new)
    if new == old:
        raise InputError(
            "old_string and new_string differ only in whitespace at line ends, which is "
            "trimmed outside Markdown files, so there is nothing to change."
        )
    return new


async def edit_result(
    ctx: ToolContext, text: str, data: dict[str, Any], target: Target, content: str
) -> ToolResult:
    """The result of a successful edit that left the file holding `content`, its patch
    made last (textdiff.with_patch: the data is final then), saying so when it applied to
    a file changed on disk."""
    if target.stale:
        text += "\n\n" + STALE_NOTE
        data["staleRecovered"] = True
        data["contentNotInModelContext"] = True
    return ToolResult.text(
        text,
        await textdiff.with_patch(
            ctx.services.offload, ctx.session.id, data, target.content, content
        ),
    )


TOOL = EditTool
