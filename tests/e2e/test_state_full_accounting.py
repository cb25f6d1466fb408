"""A full state disk is counted truthfully (issue 18, item 3): every event missing from
the journal is counted in the status and the metrics, across restarts, and the log says
"writable again" only when a commit that held real writes succeeded.

On a full disk SQLite rolls a failed commit's whole group back; the events in it were
counted nowhere and an empty commit's success was taken for "writable again".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd_client import Client
from tests.conftest import SANDBOX_UID
from tests.e2e.test_state_full import fill, small_state_disk
from tests.support.daemon import start_daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

READS = 30


def test_lost_events_are_counted(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n" * 200)
    os.chown(workspace / "a.txt", SANDBOX_UID, SANDBOX_UID)
    with small_state_disk() as base:
        daemon = start_daemon(base)
        try:
            with Client(daemon.socket, timeout=30) as c:
                sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
                filler = fill(base / "state")
                for _ in range(READS):
                    read = c.run_tool(sid, "Read", {"file_path": str(workspace / "a.txt")})
                    assert not read.is_error
                full = c.status().state
                last_seq = c.get_session(sid).last_seq
                filler.unlink()
                # A call that must be recorded commits: the disk has room again.
                c.run_tool(sid, "Write", {"file_path": str(workspace / "b.txt"), "content": "b"})
                after = c.status().state
                journaled = [e.seq for e in c.attach(sid, 0, follow=False, timeout=30) if e.seq]
            missing = last_seq - len([s for s in journaled if s <= last_seq])
            assert missing > 0  # the reads' events did not all fit
            assert full.disk_full
            # While full, what is counted is never more than what is missing: the events
            # of a group not yet committed are counted once its commit fails, which may be
            # after this status was read.
            assert full.events_unjournaled <= missing, (full.events_unjournaled, missing)
            assert not after.disk_full
            # Every event missing from the journal is counted, none more.
            assert after.events_unjournaled == missing, (after.events_unjournaled, missing)
        finally:
            assert daemon.stop() == 0, daemon.log
        # The count is kept outside the database that could not take them: a restart
        # still says how many events the journal is missing.
        again = start_daemon(base)
        try:
            with Client(again.socket, timeout=30) as c:
                assert c.status().state.events_unjournaled == missing
        finally:
            assert again.stop() == 0, again.log
    log = daemon.log
    assert "Traceback" not in log, log
    # "writable again" once, after the real commit, never while the disk was full.
    assert log.count("writable again") == 1, log
    assert f"({missing} journal events lost meanwhile)" in log, log
