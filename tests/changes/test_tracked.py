"""A run's change log read by one thread while another closes the run (another run's
refresh reads this one's log): the descriptor is never closed under the reader, and a
reused number is never parsed as events."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agentd.changes import fanotify
from agentd.changes.changeset import ChangeSet
from agentd.changes.tracked import Tracked


def test_a_close_while_the_log_is_read_waits_for_the_reader(tmp_path: Path) -> None:
    log_path = tmp_path / "run.log"
    log_path.write_bytes(fanotify.marker(fanotify.MARK_END) * 4)
    fd = os.open(log_path, os.O_RDONLY)
    tracked = Tracked("r", "s", [str(tmp_path)], None, log_path=str(log_path), log=fd)
    tracked.events = True
    reading, closed = threading.Event(), threading.Event()
    add = ChangeSet.add

    def slow_add(self: ChangeSet, events: list[fanotify.Event], resolver: object) -> None:
        reading.set()
        closed.wait(10)  # the run is closed meanwhile; the log is read on after
        add(self, events, resolver)  # type: ignore[arg-type]

    tracked.changes.add = slow_add.__get__(tracked.changes)  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def read() -> None:
        try:
            tracked.touched_paths()
        except BaseException as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    worker = threading.Thread(target=read)
    worker.start()
    assert reading.wait(10)
    tracked.close()
    assert os.path.exists(log_path)  # not yet: a reader is at work
    closed.set()
    worker.join(10)
    assert errors == []
    assert tracked.log == -1
    assert not os.path.exists(log_path)
