"""What the tracker knows beyond names (agentd/changes/known.py, persist.py): files held
open for writing or mapped shared by a uid, changes no event explains kept as suspects,
and a root's known good kept across daemons."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from agentd.changes import files, known, persist, walk
from agentd.changes.hostwatch import told
from agentd.sandboxing import codebearing


def _baseline(root: Path) -> walk.Baseline:
    return walk.scan(str(root), codebearing.table())


def test_a_shared_writable_mapping_counts_as_open_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 4096)
    st = path.stat()
    fd = os.open(path, os.O_RDWR)
    mapped = mmap.mmap(fd, 0)
    os.close(fd)  # only the mapping holds it now
    try:
        assert (st.st_dev, st.st_ino) in known.open_for_writing(os.getuid())
    finally:
        mapped.close()
    assert (st.st_dev, st.st_ino) not in known.open_for_writing(os.getuid())


def test_a_change_no_event_explains_is_kept_as_a_suspect(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{}")
    old = _baseline(tmp_path)
    (tmp_path / ".claude" / "settings.json").write_text('{"hooks": 1}')
    (tmp_path / ".envrc").write_text("evil")
    fresh = _baseline(tmp_path)
    known.settle(old, fresh, set(), set(), known.UNSEEN, new_too=False)
    assert fresh.suspects == {".claude/settings.json": known.UNSEEN}
    assert fresh.entries[".claude/settings.json"].content == b"{}"
    assert ".envrc" in fresh.entries  # new: made with an event, judged by it
    again = _baseline(tmp_path)
    known.settle(old, again, {".claude/settings.json"}, set(), known.UNSEEN, new_too=True)
    assert again.suspects == {".envrc": known.UNSEEN}


def test_a_baseline_kept_in_the_state_comes_back_whole(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".vscode").mkdir(parents=True)
    (root / ".vscode" / "tasks.json").write_text("{}")
    (root / ".envrc").write_text("")
    base = _baseline(root)
    path = persist.path_for(str(tmp_path), str(root), "1:1:()")
    persist.save(path, base)
    back = persist.load(path, str(root))
    assert back is not None
    assert persist.signature(back) == persist.signature(base)
    assert back.entries[".envrc"].restorable
    assert persist.load(path, str(tmp_path / "elsewhere")) is None


def test_identity_finds_every_name_of_a_file(tmp_path: Path) -> None:
    (tmp_path / ".envrc").write_text("x")
    os.link(tmp_path / ".envrc", tmp_path / "alias")
    ids = known.by_identity(_baseline(tmp_path))
    assert ids[known.identity_of(str(tmp_path / "alias"))] == ".envrc"  # type: ignore[index]
    assert files.read_entry(str(tmp_path), "alias") is not None


def test_the_host_watch_learns_names_between_syncs() -> None:
    triggers: set[bytes] = set()
    asked, rest = told(b"s" + b"n\x0dsettings.json" + b"ss" + b"n\x05ab", triggers)
    assert asked == b"sss"
    assert triggers == {b"settings.json"}
    assert rest == b"n\x05ab"
