"""MultiEdit: edits in order on one text, written all or not at all."""

from __future__ import annotations

from pathlib import Path


async def test_multiedit_applies_in_order(call, ws: Path) -> None:
    f = ws / "a.py"
    f.write_text("a = 1\nb = 2\nc = 3\n")
    await call("Read", {"file_path": str(f)})
    r = await call(
        "MultiEdit",
        {
            "file_path": str(f),
            "edits": [
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "a = 10\nb", "new_string": "a = 10\nbb"},
                {"old_string": "= ", "new_string": "=", "replace_all": True},
            ],
        },
    )
    assert not r.is_error and "3 edits" in r.text
    assert f.read_text() == "a =10\nbb =2\nc =3\n"
    assert r.data["originalFileContents"] == "a = 1\nb = 2\nc = 3\n"
    assert r.data["structuredPatch"][0]["lines"][:3] == ["-a = 1", "-b = 2", "-c = 3"]
    assert len(r.data["edits"]) == 3 and r.data["userModified"] is False


async def test_multiedit_all_or_nothing(call, ws: Path) -> None:
    f = ws / "a.py"
    f.write_text("a = 1\nb = 2\n")
    await call("Read", {"file_path": str(f)})
    r = await call(
        "MultiEdit",
        {
            "file_path": str(f),
            "edits": [
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "zzz", "new_string": "q"},
            ],
        },
    )
    assert r.is_error and "<tool_use_error>" in r.text and "Edit 2" in r.text
    assert f.read_text() == "a = 1\nb = 2\n"
    # An earlier edit's result is what a later one sees.
    r = await call(
        "MultiEdit",
        {
            "file_path": str(f),
            "edits": [
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "a = 1\n", "new_string": "x"},
            ],
        },
    )
    assert r.is_error and f.read_text() == "a = 1\nb = 2\n"


async def test_multiedit_requires_read_and_valid_edits(call, ws: Path) -> None:
    f = ws / "a.txt"
    f.write_text("x\n")
    edits = [{"old_string": "x", "new_string": "y"}]
    r = await call("MultiEdit", {"file_path": str(f), "edits": edits})
    assert r.is_error and "Read" in r.text
    await call("Read", {"file_path": str(f)})
    r = await call(
        "MultiEdit", {"file_path": str(f), "edits": [{"old_string": "x", "new_string": "x"}]}
    )
    assert r.is_error and "identical" in r.text
    r = await call("MultiEdit", {"file_path": str(f), "edits": []})
    assert r.is_error
    r = await call("MultiEdit", {"file_path": str(f), "edits": edits})
    assert not r.is_error and f.read_text() == "y\n"


async def test_multiedit_creates_file_and_keeps_crlf(call, ws: Path) -> None:
    r = await call(
        "MultiEdit",
        {
            "file_path": f"{ws}/new.txt",
            "edits": [
                {"old_string": "", "new_string": "one\ntwo\n"},
                {"old_string": "two", "new_string": "2"},
            ],
        },
    )
    assert not r.is_error and (ws / "new.txt").read_text() == "one\n2\n"
    f = ws / "c.txt"
    f.write_bytes(b"p\r\nq\r\n")
    await call("Read", {"file_path": str(f)})
    r = await call(
        "MultiEdit",
        {"file_path": str(f), "edits": [{"old_string": "p\nq", "new_string": "P\nQ"}]},
    )
    assert not r.is_error and f.read_bytes() == b"P\r\nQ\r\n"


def test_multiedit_schema() -> None:
    from agentd.tools.multiedit import TOOL

    schema = TOOL().input_schema
    assert schema["required"] == ["file_path", "edits"]
    assert schema["properties"]["edits"]["minItems"] == 1


async def test_multiedit_trims_line_ends_as_edit_does(call, ws: Path) -> None:
    """Each edit's new_string loses its line-end whitespace (not in Markdown), as Edit's does
    in the reference (edit_trailing_ws); an edit left with nothing to change is refused."""
    for name, want in (("a.py", "x\ny\nz\n"), ("a.md", "x  \ny\t\nz\n")):
        f = ws / name
        f.write_text("a\nb\nz\n")
        await call("Read", {"file_path": str(f)})
        r = await call(
            "MultiEdit",
            {
                "file_path": str(f),
                "edits": [
                    {"old_string": "a", "new_string": "x  "},
                    {"old_string": "b", "new_string": "y\t"},
                ],
            },
        )
        assert not r.is_error, r.text
        assert f.read_text() == want
        assert [e["new_string"] for e in r.data["edits"]] == want.split("\n")[:2]
    f = ws / "b.py"
    f.write_text("q\n")
    await call("Read", {"file_path": str(f)})
    r = await call(
        "MultiEdit", {"file_path": str(f), "edits": [{"old_string": "q", "new_string": "q "}]}
    )
    assert r.is_error and "Edit 1" in r.text and f.read_text() == "q\n"
