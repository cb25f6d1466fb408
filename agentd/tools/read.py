"""Read: a file's lines numbered for the model; images, PDFs and notebooks in their own form."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import stat
from typing import Any, NotRequired, TypedDict

from agentd.foundation.errors import InputError, ToolError
from agentd.fs import access as fsaccess
from agentd.fs import identity as fsidentity
from agentd.sessions.session import Session
from agentd.tools.base import (
    FileAccess,
    ImageBlock,
    ReadOnlyTool,
    TextBlock,
    ToolContext,
    ToolResult,
    reminder,
)
from agentd.tools.files import devices, filestate
from agentd.tools.formats import images, notebooks, pdfs

# A whole-file read (no offset/limit) of more text than this is refused: the model
# should read a part, search, or ask for it all with allow_large.
MAX_TEXT_BYTES = 256 * 1024
# allow_large still stops here, saying where to continue.
MAX_LARGE_CHARS = 2_000_000
# No file larger than this is loaded at all.
MAX_FILE_BYTES = 256 * 1024 * 1024
# A whole-file Read of a regular file up to this size runs on the event loop itself.
INLINE_READ_BYTES = 64 * 1024

BINARY_EXTENSIONS = frozenset(
    """
    exe dll so dylib bin o a obj lib class jar war ear pyc pyo pyd wasm elf
    zip gz tgz bz2 xz lz lzma zst 7z rar tar iso dmg img deb rpm apk msi cab
    mp3 mp4 m4a m4v wav flac ogg oga opus aac avi mov mkv webm wmv flv mpg mpeg
    bmp ico icns tif tiff psd ai heic heif avif raw cr2 nef
    ttf otf woff woff2 eot
    sqlite sqlite3 db mdb pdb dat pkl pickle npy npz h5 hdf5 parquet feather onnx pt pth
    doc docx xls xlsx ppt pptx odt ods odp
    """.split()  # noqa: SIM905
)

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_IMAGE_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_NOT_PLAIN_TEXT = frozenset({*_IMAGE_EXTENSIONS, ".pdf", ".ipynb"})


def _image_type(data: bytes, ext: str) -> str | None:
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _not_an_image(path: str, data: bytes) -> str:
    """An image's name on bytes that are none of the image formats: sending them as an
    image would make the API refuse the whole request."""
    head = " ".join(f"{b:02x}" for b in data[:8]) or "none: the file is empty"
    return (
        f"{path} has an image extension, but its content is not a PNG, JPEG, GIF or WebP "
        f"image (its first bytes: {head}); often a saved error or login page. Look at it "
        f'with `file "{path}"` or `head -c 500` through Bash.'
    )


def _too_large(path: str, size: int) -> str:
    return (
        f"{path} is {filestate.format_size(size)}, over the "
        f"{filestate.format_size(MAX_TEXT_BYTES)} limit for reading a whole file. "
        "Read a part with offset and limit, or search it (grep) for what you need. "
        "Set allow_large to true only if you truly need the whole file."
    )


class ReadInput(TypedDict):
    file_path: str
    offset: NotRequired[int]
    limit: NotRequired[int]
    pages: NotRequired[str]
    allow_large: NotRequired[bool]


class ReadTool(ReadOnlyTool[ReadInput]):
    name = "Read"
    description = (
        "Read a file from the local filesystem. file_path may be absolute or relative to the "
        "working directory, and must lie inside the session's workspace.\n"
        "- Text comes back with numbered lines (`N<TAB>line`), numbered from 1.\n"
        "- The whole file is returned by default. A file over 256KB needs offset (first line, "
        "from 1) and limit (number of lines); or set allow_large to read it all anyway.\n"
        "- Images (PNG, JPEG, GIF, WebP) are shown as images, scaled to fit 2000x2000. PDFs "
        "are shown as documents (each page's text and image); a PDF of more than "
        f'{pdfs.MAX_WHOLE_PAGES} pages needs pages ("3" or "1-5", at most '
        f"{pdfs.MAX_PDF_PAGES} per call). Jupyter notebooks (.ipynb) return their cells with "
        "their outputs.\n"
        "- Directories, binary files and devices cannot be read: list directories with ls.\n"
        "- Reading a file is required before Write, Edit, MultiEdit or NotebookEdit change it.\n"
        "- You may read several files at once with parallel calls."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 0, "maximum": 9007199254740991},
            "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            "pages": {"type": "string"},
            "allow_large": {"type": "boolean"},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }
    # Never moved to a file: the model would have to Read that file, and so on. Read
    # bounds its own output instead (MAX_TEXT_BYTES, offset/limit).
    max_result_chars = 1 << 62

    def file_access(self, args: ReadInput) -> FileAccess | None:
        return FileAccess("read", args["file_path"])

    def lenient_input(self, args: dict[str, Any]) -> dict[str, Any]:
        """As the reference: an offset below 0 reads from the start, a limit of 0 (or
        less) reads to the end."""
        offset, limit = args.get("offset"), args.get("limit")
        if isinstance(offset, int) and not isinstance(offset, bool) and offset < 0:
            args = {**args, "offset": 1}
        if isinstance(limit, int) and not isinstance(limit, bool) and limit <= 0:
            args = {k: v for k, v in args.items() if k != "limit"}
        return args

    async def validate_input(self, args: ReadInput, ctx: ToolContext) -> None:
        session = ctx.session
        where = fsaccess.expand(args["file_path"], session.cwd, session.home)
        if device := devices.named_device(where):
            raise InputError(
                f"Cannot read '{args['file_path']}': it names {device}, and Read never reads "
                "device or process files (they may be endless or block)."
            )
        if args.get("pages") is not None and pdfs.is_pdf_name(args["file_path"]):
            pdfs.parse_pages(args["pages"])

    async def call(self, args: ReadInput, ctx: ToolContext) -> ToolResult:
        session = ctx.session
        loc = filestate.resolve(session, args["file_path"], ctx.roots("read"), ctx)
        ext = os.path.splitext(loc.path)[1].lower()
        whole = args.get("offset") is None and args.get("limit") is None
        small = False
        # One switch to the session's identity for the stat and the small read.
        with fsidentity.acting_as(loc.identity):
            if whole and not args.get("allow_large") and ext not in _NOT_PLAIN_TEXT:
                # Refuse a big text file before loading it.
                with contextlib.suppress(OSError):
                    st = fsaccess.stat_beneath(loc)
                    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_TEXT_BYTES:
                        raise ToolError(_too_large(loc.path, st.st_size))
                    small = stat.S_ISREG(st.st_mode) and st.st_size <= INLINE_READ_BYTES
            # A small regular file the loop has just stat'ed: reading it costs less
            # than the hop to a worker thread and back.
            current = self._read(session, loc) if small else None
        if current is not None:
            if _image_type(current.data, ext) is None and not current.data.startswith(b"%PDF-"):
                return self._render(args, session, loc, current)
            # An image or PDF without its extension: decoding it is no work for the loop.
            return await asyncio.to_thread(self._render, args, session, loc, current)
        # Anything else in one hop to a worker thread, the read and the rendering
        # together, so the loop never waits on a large file.
        return await asyncio.to_thread(self._read_and_render, args, session, loc)

    def _read_and_render(
        self, args: ReadInput, session: Session, loc: fsaccess.Located
    ) -> ToolResult:
        return self._render(args, session, loc, self._read(session, loc))

    def _read(self, session: Session, loc: fsaccess.Located) -> filestate.Current:
        try:
            current = filestate.read_current(loc, MAX_FILE_BYTES, null_device=True)
        except IsADirectoryError:
            raise ToolError(
                f"EISDIR: {loc.path} is a directory, not a file. List its entries with `ls` "
                "and Read the files inside."
            ) from None
        if current is None:
            raise ToolError(filestate.not_found(loc.path, session, loc.identity))
        return current

    def _render(
        self,
        args: ReadInput,
        session: Session,
        loc: fsaccess.Located,
        current: filestate.Current,
    ) -> ToolResult:
        data = current.data
        ext = os.path.splitext(loc.path)[1].lower()
        media_type = _image_type(data, ext)
        pages = args.get("pages")
        if pages is not None and ext != ".pdf" and not data.startswith(b"%PDF-"):
            pages = None  # as the reference: pages means nothing outside a PDF
        if media_type is None and ext in _IMAGE_EXTENSIONS:
            raise ToolError(_not_an_image(loc.path, data))
        if media_type is not None:
            result = self._image(loc, data, media_type)
        elif ext == ".pdf" or data.startswith(b"%PDF-"):
            ident = loc.identity
            result = pdfs.render_pdf(
                loc.path, data, pages, (ident.uid, ident.gid) if ident else None
            )
        elif ext == ".ipynb":
            try:
                notebook = notebooks.load_notebook(data)
            except notebooks.NotANotebook as exc:
                raise ToolError(f"{exc} To see its bytes, run cat on it with Bash.") from None
            result = notebooks.render_notebook(args["file_path"], notebook, MAX_LARGE_CHARS)
        else:
            return self._text(args, session, loc, current)
        filestate.remember(session, loc.path, data, current.st, partial=False)
        return result

    def _text(
        self,
        args: ReadInput,
        session: Session,
        loc: fsaccess.Located,
        current: filestate.Current,
    ) -> ToolResult:
        data = current.data
        ext = os.path.splitext(loc.path)[1].lower()
        if ext[1:] in BINARY_EXTENSIONS:
            # By its name only, as the reference: other bytes are shown as text, with a
            # notice when they hold NULs.
            raise InputError(
                f"Read shows text, and {loc.path} appears to be a binary {ext} file. Inspect "
                "it with a command or script that understands the format (file, xxd, unzip "
                "-l, a parser library) through Bash."
            )
        offset, limit = args.get("offset"), args.get("limit")
        allow_large = bool(args.get("allow_large"))
        whole = offset is None and limit is None
        if whole and not allow_large and len(data) > MAX_TEXT_BYTES:
            raise ToolError(_too_large(loc.path, len(data)))
        text, codec = filestate.decode(data)
        if filestate.has_nul(data):
            # Binary bytes: shown as the reference shows them (U+FFFD for what is not
            # UTF-8), not as latin-1 text, with the NUL notice below.
            text = data.decode("utf-8", errors="replace")
            if codec.crlf:
                text = text.replace("\r\n", "\n")
        lines = text.split("\n")
        total = len(lines)
        start = max(offset or 1, 1)
        file_path = args["file_path"]
        notices: list[str] = []
        if text == "" and start <= 1:
            shown: list[str] = [""]
            body = reminder("Note: this file exists, but it is empty.")
        elif start > total:
            shown = []
            body = reminder(
                f"Note: the file has only {total} lines, fewer than the requested offset "
                f"({start}). Nothing was shown; use a smaller offset."
            )
        else:
            end = total if limit is None else min(total, start - 1 + limit)
            shown = lines[start - 1 : end]
            if limit is None and not whole and not allow_large:
                size = sum(len(line) + 1 for line in shown)
                if size > MAX_TEXT_BYTES:
                    raise ToolError(
                        f"Lines {start}-{end} of {loc.path} are {filestate.format_size(size)}, "
                        f"over the {filestate.format_size(MAX_TEXT_BYTES)} limit per read. "
                        "Give a limit to read fewer lines."
                    )
            numbered: list[str] = []
            size = 0
            for number, line in enumerate(shown, start):
                entry = f"{number}\t{line}"
                size += len(entry) + 1
                if size > MAX_LARGE_CHARS and numbered:
                    shown = shown[: len(numbered)]
                    notices.append(
                        f"[Output stopped after line {number - 1} of {total}, the most one "
                        f"read returns. Continue with offset={number}.]"
                    )
                    break
                numbered.append(entry)
            body = "\n".join(numbered)
            if filestate.has_nul(data):
                notices.append(
                    "[This file has NUL bytes near its start: binary data, or text in an "
                    "encoding without a byte-order mark (UTF-16/32). Edit and Write refuse "
                    "such a file: change it with a shell command that keeps its encoding.]"
                )
        partial = not (start <= 1 and len(shown) >= total)
        filestate.remember(session, loc.path, data, current.st, partial)
        text_out = "\n\n".join([body, *notices]) if notices else body
        result = ToolResult.text(
            text_out,
            {
                "type": "text",
                "file": {
                    "filePath": file_path,
                    "content": "\n".join(shown),
                    "numLines": len(shown),
                    "startLine": start,
                    "totalLines": total,
                },
            },
        )
        return result

    def _image(self, loc: fsaccess.Located, data: bytes, media_type: str) -> ToolResult:
        # Scaled to the API's limits as the reference does (see images); a scaled image
        # comes with the reference's note on mapping coordinates back.
        ident = loc.identity
        try:
            fitted = images.fit(data, media_type, (ident.uid, ident.gid) if ident else None)
        except images.ImageError as exc:
            # Never sent as it is: the API would refuse the whole request.
            raise ToolError(
                f"{loc.path} was not sent as an image: {exc}. Check it with `file` through "
                "Bash; if it is an image, convert or scale it with a tool (ImageMagick, "
                "Pillow) and Read the result."
            ) from None
        note = fitted.note
        return ToolResult(
            [ImageBlock(fitted.media_type, fitted.data), *([TextBlock(note)] if note else [])],
            data={
                "type": "image",
                "file": {
                    "base64": base64.b64encode(fitted.data).decode(),
                    "type": fitted.media_type,
                    "originalSize": len(data),
                    **({"dimensions": fitted.dimensions} if fitted.dimensions else {}),
                },
            },
        )


TOOL = ReadTool
