"""`agentd backup` copies the state database while the daemon runs; the copy, put in
place of a new state dir's database, brings the sessions back (the README's restore)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from agentd_client import Client
from tests.support.daemon import start_daemon


def test_a_backup_taken_while_running_restores_the_sessions(
    tmp_path: Path, workspace: Path
) -> None:
    daemon = start_daemon(tmp_path / "d")
    out = tmp_path / "agentd-backup.db"
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), name="kept").id
            c.run_tool(sid, "Glob", {"pattern": "*"})
            made = subprocess.run(
                [sys.executable, "-m", "agentd", "backup", str(out), "--json"]
                + ["--state-dir", daemon.state_dir],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert made.returncode == 0, made.stderr
            assert json.loads(made.stdout)["sessions"] >= 1
            again = subprocess.run(
                [sys.executable, "-m", "agentd", "backup", str(out)]
                + ["--state-dir", daemon.state_dir],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert again.returncode == 2 and "exists" in again.stderr, again.stderr
    finally:
        assert daemon.stop() == 0, daemon.log
    restored = tmp_path / "r"
    (restored / "state").mkdir(parents=True)
    shutil.copy(out, restored / "state" / "agentd.db")
    second = start_daemon(restored)
    try:
        with Client(second.socket, timeout=60) as c:
            names = {s.id: s.name for s in c.list_sessions()}
        assert names.get(sid) == "kept", names
    finally:
        assert second.stop() == 0, second.log
