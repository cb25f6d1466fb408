"""Checkpoints across sessions and daemons: two sessions on one workspace each see only
what their own calls changed; reaping a session drops the stored contents no other
row names; a daemon killed in the middle of a restore leaves no torn file, and the next
one marks the restore interrupted (agentd/changes/checkpoints.py, restore.py,
blobs.py)."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until


@pytest.fixture
def own(tmp_path: Path) -> Iterator[DaemonProcess]:
    daemon = start_daemon(tmp_path / "d")
    yield daemon
    daemon.stop()


def blob_path(state_dir: str, root: Path, content: bytes) -> Path:
    key = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    sha = hashlib.sha256(content).hexdigest()
    return Path(state_dir) / "checkpoints" / key / sha[:2] / sha[2:]


def test_two_sessions_on_one_workspace_and_reaping(own: DaemonProcess, workspace: Path) -> None:
    with Client(own.socket, timeout=120) as c:
        a = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        b = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        both = threading.Barrier(2)

        def write(sid: str, name: str) -> None:
            both.wait()
            c.run_tool(sid, "Bash", {"command": f"printf {name}-only > {name}.txt"}, f"w-{name}")

        threads = [threading.Thread(target=write, args=(s, n)) for s, n in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for sid, name in ((a, "a"), (b, "b")):
            [only] = c.diff_checkpoint(sid, f"w-{name}", fmt="names").files
            assert only.path == f"{name}.txt" and only.change == "added"
        a_blob = blob_path(own.state_dir, workspace, b"a-only")
        b_blob = blob_path(own.state_dir, workspace, b"b-only")
        assert a_blob.exists() and b_blob.exists()
        c.close_session(a)
        c.collect_sessions(reap_after_seconds=0)
        own.wait_for_log(f"reaped session {a}")
        assert not a_blob.exists() and b_blob.exists()
        with pytest.raises(grpc.RpcError):
            c.list_checkpoints(a)
        done = c.rewind_to_call(b, "w-b")
        assert done.applied and not (workspace / "b.txt").exists()


def _count(directory: Path) -> int:
    try:
        return len(os.listdir(directory))
    except FileNotFoundError:
        return 0


def test_a_daemon_killed_while_restoring_tears_no_file(tmp_path: Path, workspace: Path) -> None:
    daemon = start_daemon(tmp_path / "d")
    try:
        with Client(daemon.socket, timeout=120) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            make = "mkdir big && for i in $(seq 300); do head -c 65536 /dev/zero | tr '\\0' x "
            make += "> big/f$i; done"
            c.run_tool(sid, "Bash", {"command": make}, "k-make")
            c.run_tool(sid, "Bash", {"command": "rm -r big"}, "k-rm")
            failed: list[BaseException] = []

            def restore() -> None:
                try:
                    c.restore_checkpoint(sid, "k-rm")
                except grpc.RpcError as exc:
                    failed.append(exc)

            restoring = threading.Thread(target=restore)
            restoring.start()
            # Killed once the restore has begun writing the workspace (a kill mid-way).
            wait_until(lambda: _count(workspace / "big") >= 20, 60, "the restore began", 0.001)
            daemon.proc.send_signal(signal.SIGKILL)
            restoring.join()
        daemon.proc.wait()
        daemon = start_daemon(tmp_path / "d")  # its start removes the temp files left
        big = workspace / "big"
        for f in big.iterdir():
            assert f.name.startswith("f") and f.name[1:].isdigit(), f"left behind: {f.name}"
            assert f.read_bytes() == b"x" * 65536, f"{f.name} is torn"
        with Client(daemon.socket, timeout=120) as c:
            states = [x.state for x in c.list_checkpoints(sid)]
            assert states[:2] == ["done", "done"]
            assert states[2:] in ([], ["interrupted"], ["done"]), states
            if states[2:] == ["interrupted"]:
                assert failed
                daemon.wait_for_log("interrupted by a crash")
            done = c.restore_checkpoint(sid, "k-rm", on_conflict="overwrite")
            assert done.applied or not done.paths or states[2:] == ["done"], done.message
            assert sorted(os.listdir(big)) == sorted(f"f{i}" for i in range(1, 301))
            assert all((big / f).read_bytes() == b"x" * 65536 for f in os.listdir(big))
    finally:
        daemon.stop()


def test_caps_per_file_call_and_session_say_too_large(tmp_path: Path, workspace: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(
        "checkpoint_file_bytes = 1000\ncheckpoint_call_bytes = 3000\n"
        "checkpoint_session_bytes = 5000\n"
    )
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=120) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id

            def too_large(call: str, command: str) -> int:
                c.run_tool(sid, "Bash", {"command": command}, call)
                diff = c.diff_checkpoint(sid, call, fmt="names")
                return sum(f.after.why == "not restorable: too large" for f in diff.files)

            random = "head -c 900 /dev/urandom >"
            assert too_large("cap-file", "head -c 2000 /dev/urandom > big.bin") == 1
            assert too_large("cap-call", "; ".join(f"{random} c{i}" for i in range(5))) == 2
            assert too_large("cap-session", "; ".join(f"{random} s{i}" for i in range(3))) == 1
            names = c.diff_checkpoint(sid, "cap-file", fmt="names").text
            assert names == "A big.bin\n"  # added: its pre-image (none) is restorable
            done = c.rewind_to_call(sid, "cap-session")
            assert done.applied and not (workspace / "s0").exists()
    finally:
        daemon.stop()


def test_past_the_cap_on_paths_a_call_names_them_and_says_why(
    tmp_path: Path, workspace: Path
) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text("checkpoint_call_paths = 10\n")
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=120) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            c.run_tool(sid, "Bash", {"command": "for i in $(seq 15); do echo $i > f$i; done"}, "p")
            diff = c.diff_checkpoint(sid, "p", fmt="names")
            assert len(diff.files) == 15
            why = "not restorable: more than 10 paths changed in one call"
            assert sum(f.before.why == why for f in diff.files) == 5
            assert diff.text.count(f"({why})") == 5
            done = c.rewind_to_call(sid, "p")
            assert done.applied and len(os.listdir(workspace)) == 5
    finally:
        daemon.stop()
