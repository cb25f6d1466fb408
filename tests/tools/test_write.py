"""Write: create, read-before-write, modified-since-read, atomic and faithful to the file."""

from __future__ import annotations

import os
import time
from pathlib import Path


async def test_write_new_and_nested(call, ws: Path, session) -> None:
    r = await call("Write", {"file_path": f"{ws}/new.txt", "content": "hello\nworld\n"})
    assert not r.is_error and str(ws / "new.txt") in r.text
    assert r.data == {
        "type": "create",
        "filePath": f"{ws}/new.txt",
        "content": "hello\nworld\n",
        "structuredPatch": [],
        "originalFile": None,
        "userModified": False,
    }
    r = await call("Write", {"file_path": f"{ws}/deep/er/x.py", "content": "print('x')\n"})
    assert not r.is_error
    assert (ws / "new.txt").read_text() == "hello\nworld\n"
    assert (ws / "deep/er/x.py").read_text() == "print('x')\n"
    assert f"{ws}/new.txt" in session.read_state
    # A file this session wrote may be written again without a Read.
    r = await call("Write", {"file_path": f"{ws}/new.txt", "content": "again\n"})
    assert not r.is_error and r.data["type"] == "update"


async def test_write_existing_unread(call, ws: Path) -> None:
    (ws / "e.txt").write_text("old\n")
    r = await call("Write", {"file_path": f"{ws}/e.txt", "content": "new\n"})
    assert r.is_error and r.text.startswith("<tool_use_error>") and "Read" in r.text
    assert (ws / "e.txt").read_text() == "old\n"
    r = await call("Read", {"file_path": f"{ws}/e.txt"})
    assert r.text == "1\told\n2\t"
    r = await call("Write", {"file_path": f"{ws}/e.txt", "content": "new\n"})
    assert not r.is_error
    assert r.data == {
        "type": "update",
        "filePath": f"{ws}/e.txt",
        "content": "new\n",
        "structuredPatch": [
            {"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-old", "+new"]}
        ],
        "originalFile": "old\n",
        "userModified": False,
    }
    assert (ws / "e.txt").read_text() == "new\n"


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


async def test_write_refused_when_modified_since_read(call, ws: Path) -> None:
    f = ws / "w.txt"
    f.write_text("one\ntwo\n")
    await call("Read", {"file_path": str(f)})
    f.write_text("one\nTWO\n")
    _bump_mtime(f)
    r = await call("Write", {"file_path": str(f), "content": "x\n"})
    assert r.is_error and "<tool_use_error>" in r.text and "Read it again" in r.text
    assert f.read_text() == "one\nTWO\n"
    await call("Read", {"file_path": str(f)})
    r = await call("Write", {"file_path": str(f), "content": "x\n"})
    assert not r.is_error and f.read_text() == "x\n"


async def test_write_allowed_when_only_mtime_changed(call, ws: Path) -> None:
    f = ws / "t.txt"
    f.write_text("one\n")
    await call("Read", {"file_path": str(f)})
    _bump_mtime(f)
    r = await call("Write", {"file_path": str(f), "content": "x\n"})
    assert not r.is_error and f.read_text() == "x\n"


async def test_write_after_partial_read(call, ws: Path) -> None:
    f = ws / "p.txt"
    f.write_text("".join(f"{i}\n" for i in range(1, 11)))
    await call("Read", {"file_path": str(f), "offset": 2, "limit": 2})
    r = await call("Write", {"file_path": str(f), "content": "z\n"})
    assert not r.is_error and f.read_text() == "z\n"


async def test_write_keeps_mode_and_utf16_and_writes_line_ends_as_given(call, ws: Path) -> None:
    f = ws / "run.sh"
    f.write_bytes(b"echo a\r\necho b\r\n")
    os.chown(f, ws.stat().st_uid, ws.stat().st_gid)  # the workspace owner's, as in real use
    f.chmod(0o751)
    await call("Read", {"file_path": str(f)})
    # As the reference: Write's content is the file, line ends included (Edit keeps CRLF).
    r = await call("Write", {"file_path": str(f), "content": "echo c\necho d\n"})
    assert not r.is_error
    assert f.read_bytes() == b"echo c\necho d\n"
    assert f.stat().st_mode & 0o777 == 0o751
    r = await call("Write", {"file_path": str(f), "content": "x\r\ny\n"})
    assert f.read_bytes() == b"x\r\ny\n"
    assert r.data["structuredPatch"][0]["lines"] == ["-echo c", "-echo d", "+x\r", "+y"]
    u = ws / "u.txt"
    u.write_bytes("old\n".encode("utf-16"))
    await call("Read", {"file_path": str(u)})
    await call("Write", {"file_path": str(u), "content": "n\u00e9w\n"})
    assert u.read_bytes() == "n\u00e9w\n".encode("utf-16")


async def test_write_no_temp_files_left(call, ws: Path) -> None:
    await call("Write", {"file_path": f"{ws}/a.txt", "content": "a"})
    assert sorted(os.listdir(ws)) == ["a.txt"]


async def test_write_symlink_escapes_refused(call, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "t.txt"
    target.write_text("keep\n")
    (ws / "link.txt").symlink_to(target)
    (ws / "dirlink").symlink_to(outside)
    for path in (f"{ws}/link.txt", f"{ws}/dirlink/t.txt", f"{ws}/dirlink/new.txt", "/tmp/x.txt"):
        r = await call("Write", {"file_path": path, "content": "pwned\n"})
        assert r.is_error and "outside" in r.text, path
    assert target.read_text() == "keep\n"
    assert not (outside / "new.txt").exists()
    assert os.readlink(ws / "link.txt") == str(target)


async def test_write_directory_refused(call, ws: Path) -> None:
    (ws / "d").mkdir()
    r = await call("Write", {"file_path": f"{ws}/d", "content": "x"})
    assert r.is_error and "directory" in r.text


async def test_write_fifo_refused(call, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    start = time.monotonic()
    r = await call("Write", {"file_path": f"{ws}/pipe", "content": "x"})
    assert r.is_error and time.monotonic() - start < 5


async def test_write_new_file_mode_follows_umask(call, ws: Path) -> None:
    old = os.umask(0o027)
    try:
        await call("Write", {"file_path": f"{ws}/m.txt", "content": "x"})
    finally:
        os.umask(old)
    assert (ws / "m.txt").stat().st_mode & 0o777 == 0o640


async def test_write_under_a_file_is_an_error_not_a_crash(call, ws: Path) -> None:
    (ws / "f").write_text("x")
    r = await call("Write", {"file_path": f"{ws}/f/sub.txt", "content": "y"})
    assert r.is_error and "parent" in r.text


async def test_write_dangling_symlink_refused(call, ws: Path) -> None:
    (ws / "dangling").symlink_to("nowhere.txt")
    r = await call("Write", {"file_path": f"{ws}/dangling", "content": "y"})
    assert r.is_error and "does not exist" in r.text
