"""Edit: exact replacement after a Read, with quotes, line endings and encoding kept."""

from __future__ import annotations

import os
from pathlib import Path


async def test_edit_without_read(call, ws: Path) -> None:
    (ws / "g.txt").write_text("foo\nbar\n")
    r = await call("Edit", {"file_path": f"{ws}/g.txt", "old_string": "foo", "new_string": "FOO"})
    assert r.is_error and r.text.startswith("<tool_use_error>") and "Read" in r.text
    assert (ws / "g.txt").read_text() == "foo\nbar\n"


async def test_edit_unread_then_read_then_edit(call, ws: Path) -> None:
    # edit_unread_legacy_model: refused before a Read, applied after.
    (ws / "g.txt").write_text("foo\nbar\n")
    (ws / "e.txt").write_text("old\n")
    args = {"file_path": f"{ws}/g.txt", "old_string": "foo", "new_string": "FOO"}
    assert (await call("Edit", args)).is_error
    assert (await call("Write", {"file_path": f"{ws}/e.txt", "content": "new\n"})).is_error
    await call("Read", {"file_path": f"{ws}/g.txt"})
    r = await call("Edit", args)
    assert not r.is_error
    assert r.data["structuredPatch"] == [
        {
            "oldStart": 1,
            "oldLines": 2,
            "newStart": 1,
            "newLines": 2,
            "lines": ["-foo", "+FOO", " bar"],
        }
    ]
    assert (ws / "g.txt").read_text() == "FOO\nbar\n"


async def test_read_then_edit(call, ws: Path) -> None:
    (ws / "h.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    r = await call("Read", {"file_path": f"{ws}/h.py"})
    assert r.text == "1\tdef f():\n2\t    return 1\n3\t\n4\tprint(f())\n5\t"
    r = await call(
        "Edit",
        {"file_path": f"{ws}/h.py", "old_string": "    return 1", "new_string": "    return 2"},
    )
    assert not r.is_error and str(ws / "h.py") in r.text
    assert r.data == {
        "filePath": f"{ws}/h.py",
        "oldString": "    return 1",
        "newString": "    return 2",
        "originalFile": "def f():\n    return 1\n\nprint(f())\n",
        "structuredPatch": [
            {
                "oldStart": 1,
                "oldLines": 4,
                "newStart": 1,
                "newLines": 4,
                "lines": [" def f():", "-    return 1", "+    return 2", " ", " print(f())"],
            }
        ],
        "userModified": False,
        "replaceAll": False,
    }
    assert (ws / "h.py").read_text() == "def f():\n    return 2\n\nprint(f())\n"
    # The state is current: a second edit needs no new Read.
    r = await call("Edit", {"file_path": f"{ws}/h.py", "old_string": "f()", "new_string": "g()"})
    assert r.is_error and "2 places" in r.text
    r = await call(
        "Edit", {"file_path": f"{ws}/h.py", "old_string": "print(f())", "new_string": "print(1)"}
    )
    assert not r.is_error and "Note" not in r.text


async def test_edit_non_unique_missing_identical(call, ws: Path) -> None:
    (ws / "d.py").write_text("x = 1\ny = 1\nx = 1\n")
    await call("Read", {"file_path": f"{ws}/d.py"})
    r = await call(
        "Edit", {"file_path": f"{ws}/d.py", "old_string": "x = 1", "new_string": "x = 2"}
    )
    assert r.is_error and r.text.startswith("<tool_use_error>")
    assert "2" in r.text and "replace_all" in r.text and "x = 1" in r.text
    r = await call("Edit", {"file_path": f"{ws}/d.py", "old_string": "zzz", "new_string": "q"})
    assert r.is_error and "not found" in r.text and "zzz" in r.text
    r = await call(
        "Edit", {"file_path": f"{ws}/d.py", "old_string": "y = 1", "new_string": "y = 1"}
    )
    assert r.is_error and "identical" in r.text
    assert (ws / "d.py").read_text() == "x = 1\ny = 1\nx = 1\n"


async def test_edit_replace_all(call, ws: Path) -> None:
    (ws / "d.py").write_text("x = 1\ny = 1\nx = 1\n")
    await call("Read", {"file_path": f"{ws}/d.py"})
    r = await call(
        "Edit",
        {
            "file_path": f"{ws}/d.py",
            "old_string": "x = 1",
            "new_string": "x = 2",
            "replace_all": True,
        },
    )
    assert not r.is_error and r.data["replaceAll"] is True
    assert r.data["structuredPatch"] == [
        {
            "oldStart": 1,
            "oldLines": 3,
            "newStart": 1,
            "newLines": 3,
            "lines": ["-x = 1", "+x = 2", " y = 1", "-x = 1", "+x = 2"],
        }
    ]
    assert (ws / "d.py").read_text() == "x = 2\ny = 1\nx = 2\n"


async def test_edit_create_file(call, ws: Path, session) -> None:
    r = await call(
        "Edit", {"file_path": f"{ws}/created.txt", "old_string": "", "new_string": "fresh\n"}
    )
    assert not r.is_error
    assert r.data["originalFile"] == ""
    assert r.data["structuredPatch"] == [
        {"oldStart": 1, "oldLines": 0, "newStart": 1, "newLines": 1, "lines": ["+fresh"]}
    ]
    assert (ws / "created.txt").read_text() == "fresh\n"
    assert f"{ws}/created.txt" in session.read_state
    r = await call("Edit", {"file_path": f"{ws}/missing.txt", "old_string": "a", "new_string": "b"})
    assert r.is_error and "<tool_use_error>" in r.text and "does not exist" in r.text
    assert str(ws) in r.text
    # An empty old_string on a file with content is refused.
    r = await call("Edit", {"file_path": f"{ws}/created.txt", "old_string": "", "new_string": "x"})
    assert r.is_error and (ws / "created.txt").read_text() == "fresh\n"


async def test_edit_applies_to_changed_file_with_notice(call, ws: Path) -> None:
    f = ws / "m.txt"
    f.write_text("one\ntwo\nthree\n")
    await call("Read", {"file_path": str(f)})
    f.write_text("one\nTWO\nthree\n")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    r = await call("Edit", {"file_path": str(f), "old_string": "three", "new_string": "3"})
    assert not r.is_error
    assert "<system-reminder>" in r.text and "changed on disk" in r.text
    assert r.data["staleRecovered"] is True and r.data["originalFile"] == "one\nTWO\nthree\n"
    assert f.read_text() == "one\nTWO\n3\n"
    # Old text the model saw but that is gone now: refused, file untouched.
    f.write_text("other\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 4_000_000_000))
    r = await call("Edit", {"file_path": str(f), "old_string": "one", "new_string": "1"})
    assert r.is_error and f.read_text() == "other\n"


async def test_edit_curly_quotes(call, ws: Path) -> None:
    f = ws / "q.txt"
    f.write_text("say \u201chello\u201d and \u2018x\u2019\n")
    await call("Read", {"file_path": str(f)})
    r = await call(
        "Edit", {"file_path": str(f), "old_string": 'say "hello"', "new_string": 'say "bye"'}
    )
    assert not r.is_error
    assert r.data["oldString"] == "say \u201chello\u201d"
    assert f.read_text() == "say \u201cbye\u201d and \u2018x\u2019\n"
    r = await call("Edit", {"file_path": str(f), "old_string": "'x'", "new_string": "'don't'"})
    assert not r.is_error
    assert f.read_text() == "say \u201cbye\u201d and \u2018don\u2019t\u2019\n"


async def test_edit_keeps_crlf(call, ws: Path) -> None:
    f = ws / "crlf.txt"
    f.write_bytes(b"a\r\nb\r\n")
    await call("Read", {"file_path": str(f)})
    r = await call("Edit", {"file_path": str(f), "old_string": "a\nb", "new_string": "A\nB"})
    assert not r.is_error
    assert r.data["originalFile"] == "a\nb\n"
    assert f.read_bytes() == b"A\r\nB\r\n"


async def test_edit_keeps_utf16_and_latin1(call, ws: Path) -> None:
    u = ws / "u.txt"
    u.write_bytes("caf\u00e9 = 1\n".encode("utf-16"))
    await call("Read", {"file_path": str(u)})
    r = await call("Edit", {"file_path": str(u), "old_string": "= 1", "new_string": "= 2"})
    assert not r.is_error
    assert u.read_bytes() == "caf\u00e9 = 2\n".encode("utf-16")
    big = ws / "be.txt"
    big.write_bytes(b"\xfe\xff" + "x = 1\n".encode("utf-16-be"))
    await call("Read", {"file_path": str(big)})
    await call("Edit", {"file_path": str(big), "old_string": "1", "new_string": "2"})
    assert big.read_bytes() == b"\xfe\xff" + "x = 2\n".encode("utf-16-be")
    latin = ws / "l.txt"
    latin.write_bytes("caf\u00e9 = 1\n".encode("latin-1"))
    await call("Read", {"file_path": str(latin)})
    await call("Edit", {"file_path": str(latin), "old_string": "= 1", "new_string": "= 2"})
    assert latin.read_bytes() == "caf\u00e9 = 2\n".encode("latin-1")


async def test_edit_keeps_mode(call, ws: Path) -> None:
    f = ws / "s.sh"
    f.write_text("echo 1\n")
    os.chown(f, ws.stat().st_uid, ws.stat().st_gid)  # the workspace owner's, as in real use
    f.chmod(0o700)
    await call("Read", {"file_path": str(f)})
    await call("Edit", {"file_path": str(f), "old_string": "1", "new_string": "2"})
    assert f.read_text() == "echo 2\n" and f.stat().st_mode & 0o777 == 0o700
    assert sorted(os.listdir(ws)) == ["s.sh"]


async def test_edit_notebook_redirected(call, ws: Path) -> None:
    f = ws / "n.ipynb"
    f.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    await call("Read", {"file_path": str(f)})
    r = await call("Edit", {"file_path": str(f), "old_string": "cells", "new_string": "x"})
    assert r.is_error and "NotebookEdit" in r.text


async def test_edit_symlink_escape_refused(call, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "t.txt").write_text("keep\n")
    (ws / "link.txt").symlink_to(outside / "t.txt")
    (ws / "dirlink").symlink_to(outside)
    for path in (f"{ws}/link.txt", f"{ws}/dirlink/t.txt"):
        r = await call("Edit", {"file_path": path, "old_string": "keep", "new_string": "x"})
        assert r.is_error and "outside" in r.text
        r = await call("Edit", {"file_path": path, "old_string": "", "new_string": "x"})
        assert r.is_error and "outside" in r.text
    assert (outside / "t.txt").read_text() == "keep\n"


async def test_edit_through_inside_symlink_keeps_link(call, ws: Path) -> None:
    (ws / "real.txt").write_text("a\n")
    (ws / "alias.txt").symlink_to("real.txt")
    await call("Read", {"file_path": f"{ws}/alias.txt"})
    r = await call("Edit", {"file_path": f"{ws}/alias.txt", "old_string": "a", "new_string": "b"})
    assert not r.is_error
    assert (ws / "alias.txt").is_symlink() and (ws / "real.txt").read_text() == "b\n"


def test_structured_patch_shapes() -> None:
    from agentd.tools.files.textdiff import structured_patch

    assert structured_patch("same\n", "same\n") == []
    assert structured_patch("a", "b") == [
        {
            "oldStart": 1,
            "oldLines": 1,
            "newStart": 1,
            "newLines": 1,
            "lines": ["-a", "\\ No newline at end of file", "+b", "\\ No newline at end of file"],
        }
    ]
    old = "".join(f"{i}\n" for i in range(1, 21))
    new = old.replace("2\n", "two\n", 1).replace("19\n", "nineteen\n")
    hunks = structured_patch(old, new)
    assert [(h["oldStart"], h["oldLines"]) for h in hunks] == [(1, 5), (16, 5)]


def test_line_end_rule_matches_the_reference() -> None:
    """The reference's rule (its qPt and O3t, recorded in edit_trailing_ws): per line, split
    at CRLF/LF/CR, JavaScript's whitespace at the end goes; .md/.mdx in any case keep it."""
    from agentd.tools.files import trailing

    assert trailing.strip_line_ends("a  \r\nb\t\rc\u00a0\nd\u3000\ne\x0b") == "a\r\nb\rc\nd\ne"
    assert trailing.strip_line_ends("  lead  \n\n  \n") == "  lead\n\n\n"
    # Python's whitespace is not JavaScript's: \x1c-\x1f and \x85 stay, \ufeff goes.
    assert trailing.strip_line_ends("a\x1c\x85") == "a\x1c\x85"
    assert trailing.strip_line_ends("a\ufeff") == "a"
    for path in ("/w/a.md", "/w/b.MDX", "/w/c.Md"):
        assert trailing.keeps_trailing_space(path)
    for path in ("/w/a.markdown", "/w/a.md.txt", "/w/a.py", "/w/md", "/w/a.mdown"):
        assert not trailing.keeps_trailing_space(path)


def test_line_end_rule_holds_for_any_mix_of_breaks_and_spaces() -> None:
    """The fast per-line strip equals the rule written as regexes (split at CRLF/LF/CR,
    JavaScript's `\\s+` at each line's end removed), on random text of breaks, JavaScript
    spaces and look-alikes Python or JavaScript alone counts as whitespace."""
    import random
    import re

    from agentd.tools.files import trailing

    js_space = re.compile(
        r"[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+\Z"
    )

    def by_rule(text: str) -> str:
        parts = re.split(r"(\r\n|\n|\r)", text)
        parts[0::2] = [js_space.sub("", line) for line in parts[0::2]]
        return "".join(parts)

    alphabet = ["a", " ", "\t", "\r", "\n", "\r\n", "\x0b", "\f", "\u00a0", "\u1680",
                "\u2005", "\u200a", "\u200b", "\u2028", "\u3000", "\ufeff", "\x1c", "\x85",
                "\u180e"]  # fmt: skip
    rng = random.Random(18)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert trailing.strip_line_ends(text) == by_rule(text), repr(text)


async def test_edit_creating_a_file_keeps_line_ends(call, ws: Path) -> None:
    """The reference trims only once it has read the file: an Edit creating one keeps them."""
    f = ws / "new.py"
    r = await call("Edit", {"file_path": str(f), "old_string": "", "new_string": "made  \n"})
    assert not r.is_error, r.text
    assert f.read_text() == "made  \n"
