"""MultiEdit: several exact replacements in one file, applied in order, all or none."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from agentd.foundation.errors import InputError
from agentd.tools.base import FileAccess, Hints, Tool, ToolContext, ToolResult
from agentd.tools.edit import (
    CURRENT_NOTE,
    apply_edit,
    edit_result,
    load_target,
    new_string,
    save_target,
)
from agentd.tools.files import textdiff

PREVIEW_CHARS = 60


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


class OneEdit(TypedDict):
    old_string: str
    new_string: str
    replace_all: NotRequired[bool]


class MultiEditInput(TypedDict):
    file_path: str
    edits: list[OneEdit]


class MultiEditTool(Tool[MultiEditInput]):
    name = "MultiEdit"
    hints = Hints()  # as Edit's
    description = (
        "Make several replacements in one file in one call. Each entry of edits works like "
        "Edit (old_string, new_string, replace_all) and applies to the text left by the "
        "entries before it, in order. If any entry fails to match as required, nothing is "
        "written: the file changes only when every edit applies.\n"
        "- The file must have been Read in this session first.\n"
        "- An empty old_string in the first edit creates a file that does not exist yet.\n"
        "- Later edits see earlier results: do not target text an earlier edit replaced."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "edits": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"},
                        "replace_all": {"default": False, "type": "boolean"},
                    },
                    "required": ["old_string", "new_string"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["file_path", "edits"],
        "additionalProperties": False,
    }

    def file_access(self, args: MultiEditInput) -> FileAccess | None:
        return FileAccess("write", args["file_path"])

    async def validate_input(self, args: MultiEditInput, ctx: ToolContext) -> None:
        edits = args["edits"]
        if not edits:
            raise InputError("edits is empty: give at least one edit.")
        for number, edit in enumerate(edits, 1):
            if edit["old_string"] == edit["new_string"]:
                raise InputError(
                    f"Edit {number}: old_string and new_string are identical, so it would "
                    "change nothing."
                )
            if number > 1 and edit["old_string"] == "":
                raise InputError(
                    f"Edit {number}: old_string is empty. Only the first edit may have an "
                    "empty old_string, to create the file."
                )

    async def call(self, args: MultiEditInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        edits = args["edits"]
        target = await load_target(
            session,
            args["file_path"],
            creating=edits[0]["old_string"] == "",
            roots=ctx.roots("write"),
            ctx=ctx,
        )
        crlf = target.codec.crlf
        content = target.content
        # Each new_string as it goes into the file (line-end whitespace trimmed).
        edits = [OneEdit(**e) for e in edits]
        for number, edit in enumerate(edits, 1):
            try:
                edit["new_string"] = new_string(
                    args["file_path"], edit["old_string"], edit["new_string"], target
                )
            except InputError as exc:
                raise InputError(f"Edit {number}: {exc}") from None
            old, new = edit["old_string"], edit["new_string"]
            if crlf:
                old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
            try:
                content = apply_edit(content, old, new, bool(edit.get("replace_all"))).content
            except InputError as exc:
                raise InputError(
                    f"Edit {number} of {len(edits)} failed, so no edit was made. {exc}"
                ) from None
        await save_target(ctx, target, content, self.name)
        path = target.loc.path
        summary = "\n".join(
            f'{n}. "{_preview(e["old_string"])}" -> "{_preview(e["new_string"])}"'
            for n, e in enumerate(edits, 1)
        )
        count = f"{len(edits)} edit{'s' if len(edits) != 1 else ''}"
        text = f"Applied {count} to {path} {CURRENT_NOTE}:\n{summary}"
        data: dict[str, Any] = {
            "filePath": args["file_path"],
            "edits": [
                {
                    "old_string": e["old_string"],
                    "new_string": e["new_string"],
                    "replace_all": bool(e.get("replace_all", False)),
                }
                for e in edits
            ],
            "originalFileContents": target.content,
            textdiff.PATCH_KEY: [],
            "userModified": False,
        }
        return await edit_result(ctx, text, data, target, content)


TOOL = MultiEditTool
