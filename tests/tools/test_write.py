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


def _numbered(lines: int, tag: str) -> str:
    """Lines a third of which do not change between tags (so the patch has many hunks)."""
    return "".join(f"line {i} {tag}\n" if i % 3 else f"line {i}\n" for i in range(lines))


def test_a_large_patch_is_the_same_on_every_path(
    daemon, client, workspace: Path, session_id: str
) -> None:
    """A patch past textdiff.INLINE_PAIRS is made in a worker process with the result's
    JSON text (the journal's) and protobuf form (the reply's): the daemon sends and
    journals those as they are. Each path must carry the very data the tool made: the
    unary reply, the streamed one, a batch's, a live attached client's, the journal's
    text (json.dumps' own, byte for byte) and its replay; and an Edit's data the same."""
    import json
    import sqlite3
    import threading

    from agentd.tools.files import textdiff
    from agentd_client.core import structs

    f = workspace / "big.py"
    texts = [_numbered(400, t) for t in ("a", "b", "c", "d", "e")]
    assert not textdiff.inline_ok(texts[0], texts[1])
    f.write_text(texts[0])
    if os.geteuid() == 0:
        os.chown(f, 65534, 65534)  # the session's sandbox identity writes it
    assert not client.run_tool(session_id, "Read", {"file_path": str(f)}).is_error

    def expected(old: str, new: str) -> dict:
        return {
            "type": "update",
            "filePath": str(f),
            "content": new,
            "structuredPatch": textdiff.structured_patch(old, new, autojunk=True),
            "originalFile": old,
            "userModified": False,
        }

    live: list = []
    attached = client.attach(session_id)
    assert attached.wait_attached()

    def follow() -> None:
        for event in attached:
            if event.WhichOneof("kind") == "call_finished" and event.call_finished.name != "Read":
                live.append(structs.from_value(event.call_finished.result.data))
                if len(live) == 4:
                    return

    follower = threading.Thread(target=follow)
    follower.start()
    datas = [client.run_tool(session_id, "Write", {"file_path": str(f), "content": texts[1]}).data]
    updates = list(
        client.stream_tool(session_id, "Write", {"file_path": str(f), "content": texts[2]})
    )
    datas.append(structs.from_value(updates[-1].result.data))
    batch = client.run_tools(session_id, [("Write", {"file_path": str(f), "content": texts[3]})])
    datas.append(batch[0].data)
    edit = {"file_path": str(f), "old_string": "line 1 d\n", "new_string": "line 1 e\n"}
    edit["replace_all"] = False
    edited = texts[3].replace("line 1 d\n", "line 1 e\n", 1)
    datas.append(client.run_tool(session_id, "Edit", edit).data)
    follower.join(timeout=60)
    attached.cancel()
    assert f.read_text() == edited
    want = [expected(texts[i], texts[i + 1]) for i in range(3)]
    want.append(
        {
            "filePath": str(f),
            "oldString": "line 1 d\n",
            "newString": "line 1 e\n",
            "originalFile": texts[3],
            "structuredPatch": textdiff.structured_patch(texts[3], edited, autojunk=True),
            "userModified": False,
            "replaceAll": False,
        }
    )
    assert datas == want
    assert live == want

    db = sqlite3.connect(f"file:{daemon.state_dir}/agentd.db?mode=ro", uri=True)
    rows = db.execute(
        "SELECT payload FROM events WHERE session_id = ? AND kind = 'call_finished' ORDER BY seq",
        (session_id,),
    ).fetchall()
    db.close()
    journaled = [json.loads(text) for (text,) in rows][-4:]
    assert [j["result"]["data"] for j in journaled] == want
    for (text,) in rows[-4:]:
        assert text == json.dumps(json.loads(text))  # json.dumps' text: order, spaces, escapes
    replayed = [
        structs.from_value(e.call_finished.result.data)
        for e in client.attach(session_id, follow=False)
        if e.WhichOneof("kind") == "call_finished"
    ]
    assert replayed[-4:] == want
