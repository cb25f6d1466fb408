"""The smaller items of issue 18: what a hostile input cannot make the daemon do, and
numbers that are the file's and the database's own."""

from __future__ import annotations

import os
from pathlib import Path

from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.conftest import SANDBOX_UID
from tests.support.daemon import start_daemon


def test_grep_refuses_a_fifo(client: Client, session_id: str, workspace: Path) -> None:
    """rg would wait on a FIFO with no writer for the search's whole limit (60 s)."""
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    os.chown(fifo, SANDBOX_UID, SANDBOX_UID)
    result = client.run_tool(session_id, "Grep", {"pattern": "x", "path": str(fifo)})
    assert result.is_error
    assert "FIFO" in result.text and "never searched" in result.text, result.text


def test_ls_refuses_a_megabyte_ignore_pattern(
    client: Client, session_id: str, workspace: Path
) -> None:
    """Matching a 1 MB glob against every entry took 7.6 s of the daemon's CPU."""
    for n in range(50):
        (workspace / f"f{n}.txt").write_text("x")
    huge = "*a" * (512 * 1024)
    result = client.run_tool(session_id, "LS", {"path": str(workspace), "ignore": [huge]})
    assert result.is_error and "at most" in result.text, result.text[:300]
    many = client.run_tool(session_id, "LS", {"path": str(workspace), "ignore": ["x"] * 300})
    assert many.is_error
    ok = client.run_tool(session_id, "LS", {"path": str(workspace), "ignore": ["f1*"]})
    assert not ok.is_error and "f2.txt" in ok.text and "f10.txt" not in ok.text


def test_persisted_output_size_is_the_files(tmp_path: Path, workspace: Path) -> None:
    """Past the output file's bound the result names the size the file holds, not what
    the command printed (a 2 GB output said 2 GB of a 64 MiB file)."""
    config = tmp_path / "agentd.toml"
    config.write_text(f"task_output_bytes = {1024 * 1024}\n")
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=120) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            r = c.run_tool(sid, "Bash", {"command": "head -c 8000000 /dev/zero | tr '\\0' y"})
        assert not r.is_error, r.text[:500]
        path, size = r.data["persistedOutputPath"], r.data["persistedOutputSize"]
        assert size == os.path.getsize(path) < 8_000_000
        assert "Full output saved" not in r.text
        assert f"({size / 1024:.1f}KB), saved to: {path}" in r.text
    finally:
        assert daemon.stop() == 0, daemon.log


def test_used_bytes_counts_the_database_and_its_log(tmp_path: Path, workspace: Path) -> None:
    """GetStatus said 0.26 MB while the database and its WAL held 147 MB: it was the
    size measured by the last retention pass, made at start."""
    daemon = start_daemon(tmp_path / "d")
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            for n in range(40):
                text = f"{n} " + "words " * 20_000  # ~120 KB each, ~5 MB in all
                c.append_agent_event(
                    sid, pb.AgentEvent(conversation_id="c", prompt=pb.AgentPrompt(text=text))
                )
            used = c.status().state.used_bytes
        state = Path(daemon.state_dir)
        on_disk = sum(
            (state / name).stat().st_size
            for name in ("agentd.db", "agentd.db-wal")
            if (state / name).exists()
        )
        assert on_disk > 4_000_000
        assert used >= 4_000_000, (used, on_disk)
    finally:
        assert daemon.stop() == 0, daemon.log
