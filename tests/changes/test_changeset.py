"""The change set of a run, from the kernel's own events (agentd/changes/reader.py,
changeset.py): exact for what the run's processes did, blind to everyone else's.

Real fanotify and a real reader in its own pid namespace: needs root (the daemon's
events mode); skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.changes import fanotify, reader
from agentd.changes.changeset import ADDED, CHANGED, DELETED, REPLACED, Change
from agentd.changes.tracked import Tracked

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="fanotify marks need root")


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agentd-cs-", dir="/var/tmp"))
    (path / "old").mkdir()
    (path / "old" / "kept.txt").write_text("kept\n")
    (path / "edit.txt").write_text("before\n")
    (path / "gone.txt").write_text("gone\n")
    (path / "tree").mkdir()
    (path / "tree" / "leaf.txt").write_text("leaf\n")
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def track(root: Path, script: str, *, meanwhile: str = "", cap: int = reader.LOG_CAP) -> Tracked:
    """Run `script` (sh, in `root`) as a run whose reader follows it, its log capped at
    `cap` bytes; `meanwhile` runs at the same time from outside the run (another process
    of the host)."""
    tracked = Tracked("t", "s", [str(root)], None)
    tracked.log = os.open(root.parent, os.O_TMPFILE | os.O_RDWR, 0o600)
    tracked.group = fanotify.open_group()
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    fanotify.mark_filesystem(tracked.group, fd)
    os.close(fd)
    outside = subprocess.Popen(["sh", "-c", f"cd {root} && {meanwhile}"]) if meanwhile else None
    run = reader.start(tracked.group, tracked.log, cap)
    try:
        subprocess.run(["sh", "-c", script], cwd=root, check=True)
    finally:
        # The shim does this: its next children would land in the dead namespace.
        reader._children_back_home()
        if outside is not None:
            outside.wait()
        run.finish()
    tracked.events = True
    tracked.release_group()
    tracked.collect()
    return tracked


def test_every_kind_of_change_is_named_once_by_its_path_after_the_run(root: Path) -> None:
    t = track(
        root,
        "echo new > new.txt && echo after >> edit.txt && rm gone.txt && "
        "mv old moved && echo more > moved/more.txt && rm -rf tree && "
        "echo tmp > tmp && rm tmp && echo x > staged && mv staged edit2.txt && "
        "ln -s new.txt link && chmod 600 new.txt",
    )
    p = str(root)
    assert t.changes.ended and t.changes.complete
    assert set(t.changes.changes()) == {
        Change(f"{p}/new.txt", ADDED, False),
        Change(f"{p}/edit.txt", CHANGED, False),
        Change(f"{p}/gone.txt", DELETED, False),
        Change(f"{p}/old", DELETED, True),
        Change(f"{p}/moved", REPLACED, True),
        Change(f"{p}/moved/more.txt", ADDED, False),
        Change(f"{p}/tree", DELETED, True),
        Change(f"{p}/tree/leaf.txt", DELETED, False),
        Change(f"{p}/edit2.txt", REPLACED, False),
        Change(f"{p}/link", ADDED, False),
    }
    assert t.changes.moves == [(f"{p}/old", f"{p}/moved")]


def test_the_runs_short_lived_processes_count_and_others_do_not(root: Path) -> None:
    # The run's writer is a child that exits at once (its events carry a pid that no
    # longer exists when they are read); the host's writer runs meanwhile, outside the
    # run's namespace.
    t = track(
        root,
        "sh -c 'echo quick > quick.txt' & wait",
        meanwhile="for i in 1 2 3 4 5; do echo $i > host-$i.txt; done",
    )
    paths = {c.path for c in t.changes.changes()}
    assert paths == {f"{root}/quick.txt"}


def test_a_log_past_its_cap_says_events_were_lost(root: Path) -> None:
    t = track(root, "for i in $(seq 100); do echo $i > f$i; done", cap=2048)
    assert not t.changes.complete
