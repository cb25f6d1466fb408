"""Read: numbering, notices, limits, kinds of file, and what it must never open."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.tools.base import DocumentBlock, ImageBlock
from tests.support.data import ORACLE, TOOL_SCHEMAS

PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63646060f80f0000040201005e5b2d9a0000000049454e44ae426082"
)


async def test_read_small(call, ws: Path, session) -> None:
    (ws / "f.txt").write_text("alpha\nbeta\ngamma\n")
    r = await call("Read", {"file_path": f"{ws}/f.txt"})
    assert not r.is_error
    assert r.text == "1\talpha\n2\tbeta\n3\tgamma\n4\t"
    assert r.data == {
        "type": "text",
        "file": {
            "filePath": f"{ws}/f.txt",
            "content": "alpha\nbeta\ngamma\n",
            "numLines": 4,
            "startLine": 1,
            "totalLines": 4,
        },
    }
    state = session.read_state[f"{ws}/f.txt"]
    assert state.size == 17 and not state.partial


async def test_read_offset_limit(call, ws: Path, session) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    r = await call("Read", {"file_path": f"{ws}/n.txt", "offset": 5, "limit": 3})
    assert r.text == "5\tline 5\n6\tline 6\n7\tline 7"
    assert r.data["file"] == {
        "filePath": f"{ws}/n.txt",
        "content": "line 5\nline 6\nline 7",
        "numLines": 3,
        "startLine": 5,
        "totalLines": 21,
    }
    assert session.read_state[f"{ws}/n.txt"].partial


async def test_read_missing_mentions_cwd_and_similar(call, ws: Path) -> None:
    (ws / "present.txt").write_text("x\n")
    r = await call("Read", {"file_path": f"{ws}/nope.txt"})
    assert r.is_error and "does not exist" in r.text and str(ws) in r.text
    assert "<tool_use_error>" not in r.text
    r = await call("Read", {"file_path": f"{ws}/presen.txt"})
    assert r.is_error and f"{ws}/present.txt" in r.text
    r = await call("Read", {"file_path": f"{ws}/present.md"})
    assert r.is_error and f"{ws}/present.txt" in r.text


async def test_read_empty(call, ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    r = await call("Read", {"file_path": f"{ws}/empty.txt"})
    assert not r.is_error
    assert r.text.startswith("<system-reminder>") and "empty" in r.text
    assert r.data["file"] == {
        "filePath": f"{ws}/empty.txt",
        "content": "",
        "numLines": 1,
        "startLine": 1,
        "totalLines": 1,
    }


async def test_read_directory_relative_and_past_end(call, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("one\ntwo\n")
    r = await call("Read", {"file_path": f"{ws}/sub"})
    assert r.is_error and "EISDIR" in r.text and "ls" in r.text
    r = await call("Read", {"file_path": "sub/a.txt"})
    assert r.text == "1\tone\n2\ttwo\n3\t"
    assert r.data["file"]["filePath"] == "sub/a.txt"
    r = await call("Read", {"file_path": f"{ws}/sub/a.txt", "offset": 10})
    assert not r.is_error
    assert r.text.startswith("<system-reminder>") and "(10)" in r.text and "3 lines" in r.text
    assert r.data["file"] == {
        "filePath": f"{ws}/sub/a.txt",
        "content": "",
        "numLines": 0,
        "startLine": 10,
        "totalLines": 3,
    }


async def test_read_home_relative(call, session) -> None:
    home = Path(session.home)
    session.workspace_roots.append(str(home))
    (home / "h.txt").write_text("hi\n")
    r = await call("Read", {"file_path": "~/h.txt"})
    assert r.text == "1\thi\n2\t"


async def test_read_large_and_long_lines(call, ws: Path) -> None:
    # As the reference: no line cap by default and long lines kept whole.
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    r = await call("Read", {"file_path": f"{ws}/big.txt"})
    assert r.text.endswith("2499\t2499\n2500\t2500\n2501\t")
    assert r.data["file"]["numLines"] == 2501 and r.data["file"]["totalLines"] == 2501
    (ws / "wide.txt").write_text("x" * 3000 + "\nshort\n")
    r = await call("Read", {"file_path": f"{ws}/wide.txt"})
    assert r.text == "1\t" + "x" * 3000 + "\n2\tshort\n3\t"


async def test_read_too_large_needs_offset_limit(call, ws: Path) -> None:
    (ws / "huge.txt").write_text(("abcdefghij" * 10 + "\n") * 4000)
    r = await call("Read", {"file_path": f"{ws}/huge.txt"})
    assert r.is_error and "offset" in r.text and "limit" in r.text and "allow_large" in r.text
    r = await call("Read", {"file_path": f"{ws}/huge.txt", "offset": 3999, "limit": 5})
    assert not r.is_error
    assert r.text.split("\n")[-1] == "4001\t"
    assert r.data["file"]["numLines"] == 3
    r = await call("Read", {"file_path": f"{ws}/huge.txt", "allow_large": True})
    assert not r.is_error and r.data["file"]["numLines"] == 4001


async def test_read_crlf_shown_as_lines(call, ws: Path) -> None:
    (ws / "c.txt").write_bytes(b"a\r\nb\r\n")
    r = await call("Read", {"file_path": f"{ws}/c.txt"})
    assert r.text == "1\ta\n2\tb\n3\t"


async def test_read_utf16(call, ws: Path) -> None:
    (ws / "u.txt").write_bytes("h\u00e9llo\nw\n".encode("utf-16"))
    r = await call("Read", {"file_path": f"{ws}/u.txt"})
    assert r.text == "1\th\u00e9llo\n2\tw\n3\t"


async def test_read_image(call, ws: Path, session) -> None:
    (ws / "p.png").write_bytes(PNG_1X1)
    r = await call("Read", {"file_path": f"{ws}/p.png"})
    assert not r.is_error
    [block] = r.content
    assert isinstance(block, ImageBlock)
    assert block.media_type == "image/png" and block.data == PNG_1X1
    assert r.data["type"] == "image" and r.data["file"]["type"] == "image/png"
    assert r.data["file"]["originalSize"] == len(PNG_1X1)
    assert f"{ws}/p.png" in session.read_state


async def test_read_jpeg_by_magic(call, ws: Path) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 3), "red").save(buf, "JPEG")
    (ws / "photo.dat.jpg").write_bytes(buf.getvalue())
    r = await call("Read", {"file_path": f"{ws}/photo.dat.jpg"})
    assert r.content[0].media_type == "image/jpeg"
    assert r.data["file"]["dimensions"]["originalWidth"] == 4


def _make_pdf(path: Path, texts: list[str]) -> None:
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    for text in texts:
        page = writer.add_blank_page(width=200, height=200)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    with open(path, "wb") as fh:
        writer.write(fh)


def _pdf_pages_text(data: bytes) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() for p in PdfReader(io.BytesIO(data)).pages]


async def test_read_pdf_is_a_document(call, ws: Path) -> None:
    """The PDF itself goes to the model as a document block, as the reference sends it;
    pages sends a PDF of just those pages (the reference renders them to images)."""
    _make_pdf(ws / "d.pdf", ["first page", "second page", "third page"])
    whole = (ws / "d.pdf").read_bytes()
    r = await call("Read", {"file_path": f"{ws}/d.pdf"})
    assert not r.is_error
    head, doc = r.content
    assert head.text == f"PDF file read: {ws}/d.pdf ({len(whole) / 1024:.1f}KB)"
    assert isinstance(doc, DocumentBlock) and doc.media_type == "application/pdf"
    assert doc.data == whole
    assert r.data == {
        "type": "pdf",
        "file": {"filePath": f"{ws}/d.pdf", "originalSize": len(whole), "numPages": 3},
    }
    r = await call("Read", {"file_path": f"{ws}/d.pdf", "pages": "2"})
    assert r.text.startswith(f"PDF pages extracted: 1 page(s) from {ws}/d.pdf")
    assert _pdf_pages_text(r.content[1].data) == ["second page"]
    assert r.data["file"]["numPages"] == 3 and r.data["file"]["startPage"] == 2
    r = await call("Read", {"file_path": f"{ws}/d.pdf", "pages": " 2 - 9 "})
    assert _pdf_pages_text(r.content[1].data) == ["second page", "third page"]
    r = await call("Read", {"file_path": f"{ws}/d.pdf", "pages": "1-3"})
    assert r.content[1].data == whole  # all of it: the file as it is
    for bad in ("0", "3-1", "x", "1,3", "1-30", "2-"):
        r = await call("Read", {"file_path": f"{ws}/d.pdf", "pages": bad})
        assert r.is_error and "<tool_use_error>" in r.text, bad
    r = await call("Read", {"file_path": f"{ws}/d.pdf", "pages": "4"})
    assert r.is_error and "3 pages" in r.text and "<tool_use_error>" not in r.text


async def test_read_pdf_limits(call, ws: Path) -> None:
    """More than 10 pages need pages; empty, headerless, over 20 MB and unparsable PDFs
    are refused (recorded: pdf_reads)."""
    _make_pdf(ws / "long.pdf", [f"page {n}" for n in range(1, 12)])
    r = await call("Read", {"file_path": f"{ws}/long.pdf"})
    assert r.is_error and "11 pages" in r.text and "pages" in r.text
    r = await call("Read", {"file_path": f"{ws}/long.pdf", "pages": "10-20"})
    assert not r.is_error and _pdf_pages_text(r.content[1].data) == ["page 10", "page 11"]
    (ws / "empty.pdf").write_bytes(b"")
    (ws / "text.pdf").write_text("just text\n")
    (ws / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body\n")
    for name, why in (("empty", "empty"), ("text", "%PDF-"), ("broken", "could not be read")):
        r = await call("Read", {"file_path": f"{ws}/{name}.pdf"})
        assert r.is_error and why in r.text, r.text
    big = ws / "big.pdf"
    subprocess.run(  # a 2-page PDF with 21 MB in an unreferenced stream, as the oracle case
        [sys.executable, ORACLE / "make_media.py", "pdf", big, "2", str(21 * 1024 * 1024)],
        check=True,
    )
    r = await call("Read", {"file_path": str(big)})
    assert r.is_error and "21MB" in r.text and "20MB" in r.text
    r = await call("Read", {"file_path": str(big), "pages": "2"})
    assert not r.is_error and _pdf_pages_text(r.content[1].data) == ["Page 2 of 2"]
    assert len(r.content[1].data) < 10_000


async def test_read_notebook(call, ws: Path, session) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "id": "c1", "metadata": {}, "source": ["# Title\n", "text"]},
            {
                "cell_type": "code",
                "id": "c2",
                "execution_count": 1,
                "metadata": {},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": ["3\n"]}],
                "source": ["print(1+2)"],
            },
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (ws / "nb.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    r = await call("Read", {"file_path": f"{ws}/nb.ipynb"})
    assert r.text == (
        '<cell id="c1"><cell_type>markdown</cell_type># Title\ntext</cell id="c1">\n'
        '<cell id="c2">print(1+2)</cell id="c2">\n\n3\n\n'
    )
    assert r.data == {
        "type": "notebook",
        "file": {
            "filePath": f"{ws}/nb.ipynb",
            "cells": [
                {"cellType": "markdown", "source": "# Title\ntext", "cell_id": "c1"},
                {
                    "cellType": "code",
                    "source": "print(1+2)",
                    "execution_count": 1,
                    "cell_id": "c2",
                    "language": "python",
                    "outputs": [{"output_type": "stream", "text": "3\n"}],
                },
            ],
        },
    }
    assert f"{ws}/nb.ipynb" in session.read_state


async def test_read_binary_refused_by_extension_else_shown_with_a_notice(call, ws: Path) -> None:
    (ws / "x.exe").write_bytes(b"MZ\x00\x00\x01")
    r = await call("Read", {"file_path": f"{ws}/x.exe"})
    assert r.is_error and "<tool_use_error>" in r.text and "binary" in r.text
    # As the reference: bytes under an unknown extension (or none) come back as text.
    for name in ("blob", "blob.xyz"):
        (ws / name).write_bytes(bytes(range(256)) * 8)
        r = await call("Read", {"file_path": f"{ws}/{name}"})
        assert not r.is_error and r.text.startswith("1\t\x00\x01") and "NUL" in r.text
        assert r.data["file"]["numLines"] == 9


async def test_read_text_with_nul_has_notice(call, ws: Path) -> None:
    (ws / "nul.txt").write_bytes(b"a\x00b\n")
    r = await call("Read", {"file_path": f"{ws}/nul.txt"})
    assert not r.is_error and r.text.startswith("1\ta\x00b\n2\t\n\n[") and "NUL" in r.text


async def test_read_symlink_escapes_refused(call, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "dirlink").symlink_to(outside)
    for path in (f"{ws}/link.txt", f"{ws}/dirlink/secret.txt", f"{ws}/../outside/secret.txt"):
        r = await call("Read", {"file_path": path})
        assert r.is_error and "outside" in r.text, path
        assert "secret\n" not in r.text


async def test_read_symlink_inside_allowed(call, ws: Path) -> None:
    (ws / "real.txt").write_text("ok\n")
    (ws / "alias.txt").symlink_to("real.txt")
    r = await call("Read", {"file_path": f"{ws}/alias.txt"})
    assert r.text == "1\tok\n2\t"


async def test_read_dev_zero_refused(call, ws: Path, session) -> None:
    (ws / "zero").symlink_to("/dev/zero")
    r = await asyncio.wait_for(call("Read", {"file_path": f"{ws}/zero"}), 5)
    assert r.is_error
    assert r.is_error and "outside" in r.text
    for path in (
        "/dev/zero",
        "/dev/stdin",
        "/dev/tty",
        "/proc/self/fd/0",
        "/dev/fd/0",
        " /dev/zero\n",
    ):
        r = await asyncio.wait_for(call("Read", {"file_path": path}), 5)
        assert r.is_error and r.text.startswith("<tool_use_error>Cannot read"), r.text
    if os.geteuid() == 0:
        # A device under a name that says nothing (a node in the workspace) is never read.
        os.mknod(ws / "node", stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's
        r = await asyncio.wait_for(call("Read", {"file_path": f"{ws}/node"}), 5)
        assert r.is_error and "regular file" in r.text
    # /dev/null never blocks: where it may be read, it is an empty file (as the reference).
    session.workspace_roots.append("/dev")
    r = await call("Read", {"file_path": "/dev/null"})
    assert not r.is_error and "empty" in r.text


async def test_lenient_offsets_limits_and_pages(call, ws: Path) -> None:
    (ws / "f.txt").write_text("l1\nl2\nl3\n")
    whole = "1\tl1\n2\tl2\n3\tl3\n4\t"
    for extra in ({"offset": -1}, {"limit": 0}, {"pages": "1"}):
        r = await call("Read", {"file_path": f"{ws}/f.txt", **extra})
        assert not r.is_error and r.text == whole, (extra, r.text)


async def test_read_fifo_refused_without_hanging(call, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    r = await asyncio.wait_for(call("Read", {"file_path": f"{ws}/pipe"}), 5)
    assert r.is_error and "regular file" in r.text


@pytest.mark.parametrize("offset", [0, 1])
async def test_read_offset_zero_is_first_line(call, ws: Path, offset: int) -> None:
    (ws / "a.txt").write_text("1\n2\n3\n")
    r = await call("Read", {"file_path": f"{ws}/a.txt", "offset": offset, "limit": 2})
    assert r.text == "1\t1\n2\t2"


def test_read_spec_flags() -> None:
    from agentd.tools.read import TOOL

    tool = TOOL()
    assert tool.is_read_only({}) and tool.is_concurrency_safe({})
    assert tool.file_access({"file_path": "x"}).mode == "read"
    ref_file = TOOL_SCHEMAS
    if not ref_file.exists():
        pytest.skip("no reference schemas here")
    schemas = json.loads(ref_file.read_text())
    ref = next(t for t in schemas["tools"] if t["name"] == "Read")
    assert tool.input_schema == ref["input_schema"]
