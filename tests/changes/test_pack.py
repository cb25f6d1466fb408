"""A capture's pack (agentd/changes/pack.py): contents found again by their record, and a
damaged or missing one read as missing, never as other bytes."""

from __future__ import annotations

import os
from pathlib import Path

from agentd.changes.pack import Pack


def test_contents_come_back_by_their_record(tmp_path: Path) -> None:
    pack = Pack(str(tmp_path / "p.pack"))
    small, packable, random = b"x", b"a" * 100_000, os.urandom(5000)
    records = [pack.add(data) for data in (small, packable, random, b"")]
    assert [pack.get(r) for r in records] == [small, packable, random, b""]
    assert os.path.getsize(tmp_path / "p.pack") < 10_000 + 5000  # the repeated bytes packed
    assert os.stat(tmp_path / "p.pack").st_mode & 0o777 == 0o600


def test_a_damaged_record_or_a_removed_pack_reads_as_missing(tmp_path: Path) -> None:
    pack = Pack(str(tmp_path / "p.pack"))
    record = pack.add(os.urandom(100))
    with open(tmp_path / "p.pack", "r+b") as f:
        f.seek(50)
        f.write(b"\0\0\0")
    assert pack.get(record) is None
    pack.remove()
    assert pack.get(record) is None
    assert not (tmp_path / "p.pack").exists()
