"""Write: create a file, or replace one the session has read, atomically."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from agentd.foundation.errors import InputError
from agentd.tools.base import FileAccess, Hints, Tool, ToolContext, ToolResult
from agentd.tools.files import filestate, recorded, textdiff, trailing

CURRENT_NOTE = "(your view of the file is current; there is no need to Read it again)"


class WriteInput(TypedDict):
    file_path: str
    content: str


class WriteTool(Tool[WriteInput]):
    name = "Write"
    hints = Hints(idempotent=True)  # replaces a file whole
    description = (
        "Write a file: create it, or replace its whole content. file_path may be absolute or "
        "relative to the working directory, inside the session's workspace; missing parent "
        "directories are created.\n"
        "- An existing file must have been Read in this session first, and must not have "
        "changed on disk since; otherwise the write is refused and you must Read it again.\n"
        "- To change part of a file, prefer Edit or MultiEdit: they send only the change.\n"
        "- The content is written as given, line endings included, except that whitespace "
        "at the end of a line is removed outside Markdown (.md, .mdx) files; the file keeps "
        "its permissions and encoding; the write is atomic."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "content": {"type": "string"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    def file_access(self, args: WriteInput) -> FileAccess | None:
        return FileAccess("write", args["file_path"])

    async def call(self, args: WriteInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        loc = filestate.resolve(session, args["file_path"], ctx.roots("write"), ctx)
        # Line-end whitespace trimmed outside Markdown, as the reference writes (trailing.py).
        content: str = trailing.as_written(args["file_path"], args["content"])
        try:
            current = await asyncio.to_thread(filestate.read_current, loc, filestate.MAX_EDIT_BYTES)
        except IsADirectoryError:
            raise InputError(f"{loc.path} is a directory; give the path of a file.") from None
        original: str | None = None
        codec = filestate.UTF8
        if current is not None:
            filestate.require_read(session, loc.path)
            if filestate.is_modified(session, loc.path, current):
                raise InputError(filestate.MODIFIED)
            if filestate.has_nul(current.data):
                filestate.refuse_nul(loc.path)
            original, codec = filestate.decode(current.data)
            # The content's own line ends, as the reference writes them (Edit keeps a
            # file's CRLF; Write replaces the whole file as given). Encoding and BOM stay.
            codec = filestate.TextCodec(codec.encoding, codec.bom, False)
        data = codec.encode(content)
        await recorded.write(ctx, self.name, loc, data, current)
        filestate.remember_written(session, loc, data)
        fields: dict[str, Any] = {
            "type": "create" if original is None else "update",
            "filePath": args["file_path"],
            "content": content,
            textdiff.PATCH_KEY: [],
            "originalFile": original,
            "userModified": False,
        }
        if original is None:
            return ToolResult.text(f"Created the file {loc.path} {CURRENT_NOTE}.", fields)
        fields = await textdiff.with_patch(
            ctx.services.offload, session.id, fields, original, content
        )
        return ToolResult.text(f"Updated the file {loc.path} {CURRENT_NOTE}.", fields)


TOOL = WriteTool
