"""The host watch (agentd/changes/host.py, hostwatch.py): listed names anyone makes on a
workspace's filesystem are told to the daemon, and only those; after a sync, every
change made before it. Real fanotify and the real watching process: needs root."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from agentd.changes.host import HostWatch

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="fanotify marks need root")


def test_listed_names_are_told_after_a_sync_and_nothing_else() -> None:
    root = Path(tempfile.mkdtemp(prefix="agentd-host-"))

    async def scenario() -> tuple[set[str], bool, bool]:
        watch = HostWatch()
        try:
            assert watch.watch(str(root))
            await watch.sync()
            _, first_lost = await asyncio.to_thread(watch.take, [str(root)])
            (root / "pkg").mkdir()
            (root / "pkg" / ".npmrc").write_text("registry=x\n")
            (root / "pkg" / "index.js").write_text("noise\n")
            subprocess.run(["git", "init", "-q", str(root / "vendor")], check=True)
            await watch.sync()
            told, lost = await asyncio.to_thread(watch.take, [str(root)])
            return told, lost, first_lost
        finally:
            watch.stop()

    try:
        told, lost, first_lost = asyncio.run(scenario())
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)
    assert first_lost  # what happened before it watched is not known
    assert not lost
    assert f"{root}/pkg/.npmrc" in told
    assert f"{root}/vendor/.git" in told and f"{root}/vendor/.git/config" in told
    assert f"{root}/pkg/index.js" not in told


def test_an_unwatched_files_writes_are_not_reported() -> None:
    """The daemon's journal (its db and WAL) is marked ignored in the host watch's group:
    each page written to it was a fanotify event made on the event loop's thread."""
    from agentd.changes import fanotify

    root = Path(tempfile.mkdtemp(prefix="agentd-host-"))
    journal, other = root / "agentd.db-wal", root / "other.txt"
    journal.touch()
    other.touch()
    group = fanotify.open_group()
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        fanotify.mark_filesystem(group, fd)
        fanotify.ignore_file(group, str(journal))
        for path in (journal, other, journal):  # a write after the first is ignored too
            with open(path, "a") as f:
                f.write("x" * 10_000)
        # fanotify queues an event as the write happens: all are there now.
        events, _ = fanotify.parse(fanotify.read_available(group))
    finally:
        os.close(fd)
        os.close(group)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    names = {e.name for e in events}
    assert "other.txt" in names
    assert "agentd.db-wal" not in names


def test_events_dropped_on_one_filesystem_stale_only_its_roots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One session's churn past the cap walks again only the workspaces on the
    filesystem whose events were dropped, not every session's."""
    from agentd.changes import host
    from agentd.changes.fanotify import Event, Fid

    busy = Path(tempfile.mkdtemp(prefix="agentd-host-", dir="/var/tmp"))
    quiet = Path(tempfile.mkdtemp(prefix="agentd-host-", dir="/dev/shm"))
    assert host.fsid_of(str(busy)) != host.fsid_of(str(quiet))
    monkeypatch.setattr(host, "_MAX_EVENTS", 10)
    watch = HostWatch()
    try:
        churn = Fid(host.fsid_of(str(busy)), b"\x01\x00\x00\x00" + b"x" * 8)
        for i in range(50):
            watch.keep(Event(0x2, 5, dir=churn, name=f"config{i % 20}"))
        watch.keep(Event(0x2, 5, dir=churn, name="config0"))  # a repeat costs nothing
        _, missed = watch.take([str(busy), str(quiet)])
    finally:
        watch.stop()
        subprocess.run(["rm", "-rf", str(busy), str(quiet)], check=False)
    assert missed == {str(busy)}
