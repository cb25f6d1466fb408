"""The journal tells the truth after faults (issue 18, item 3): calls a kill -9 left
open end as interrupted at the next start, an acknowledged close is never reverted,
a damaged or missing database is reported in one line.

Each test starts its own daemons (kill -9 and restart on one state dir).
"""

from __future__ import annotations

import contextlib
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import grpc

from agentd_client import Client
from agentd_client.integrations.conversation import rebuild
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import DaemonProcess, start_daemon


def _journal(client: Client, session_id: str) -> list:
    return [e for e in client.attach(session_id, 0, follow=False, timeout=60) if e.seq]


def _open_calls(state_dir: str) -> int:
    """Calls the daemon has committed as started and not ended (read-only look)."""
    db = sqlite3.connect(f"file:{state_dir}/agentd.db?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM open_calls").fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # not made yet
    finally:
        db.close()


def _wait_open(state_dir: str, at_least: int, daemon: DaemonProcess) -> None:
    with daemon.logged:
        done = daemon.logged.wait_for(
            lambda: _open_calls(state_dir) >= at_least or daemon.proc.poll() is not None, 30
        )
    assert done and daemon.proc.poll() is None


def test_calls_open_at_kill_end_as_interrupted(tmp_path: Path, workspace: Path) -> None:
    base = tmp_path / "d"
    rng = random.Random(18)
    daemon = start_daemon(base)
    asked: list[str] = []
    try:
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace)).id  # default mode: a write asks a person
            errors: list[BaseException] = []

            def ask(n: int) -> None:
                try:
                    c.run_tool(sid, "Bash", {"command": f"touch f{n}"}, f"toolu_ask{n}")
                except grpc.RpcError:
                    pass  # the daemon is killed under it
                except BaseException as exc:  # pragma: no cover
                    errors.append(exc)

            # A person's terminal is attached (asks need one) and never answers.
            watcher = c.attach(sid)
            assert watcher.wait_attached()
            threads = [threading.Thread(target=ask, args=(n,)) for n in range(3)]
            for n, t in enumerate(threads):
                t.start()
                asked.append(f"toolu_ask{n}")
            pending = set(asked)
            for e in watcher:
                if e.HasField("permission_requested"):
                    pending.discard(e.permission_requested.tool_use_id)
                    if not pending:
                        break
            # A random number of quick calls end before the kill, some run across it.
            for _ in range(rng.randint(1, 8)):
                c.run_tool(sid, "Bash", {"command": "echo quick"})
            _wait_open(daemon.state_dir, 3, daemon)
            daemon.stop(signal.SIGKILL)
            watcher.cancel()
            for t in threads:
                t.join(30)
            assert not errors
    finally:
        daemon.stop(signal.SIGKILL)

    again = start_daemon(base)
    try:
        with Client(again.socket, timeout=60) as c:
            events = _journal(c, sid)
            started = [e.call_started.tool_use_id for e in events if e.HasField("call_started")]
            finished = [
                e.call_finished.result.tool_use_id for e in events if e.HasField("call_finished")
            ]
            # Every call the journal holds has exactly one end.
            assert sorted(started) == sorted(finished), (started, finished)
            for e in events:
                if e.HasField("call_finished") and e.call_finished.result.tool_use_id in asked:
                    result = e.call_finished.result
                    assert result.is_error
                    assert "interrupted" in result.content[0].text
            assert set(asked) <= set(finished)
        assert "ended 3 call(s) a crash left open as interrupted" in again.log, again.log
        assert _open_calls(again.state_dir) == 0
    finally:
        assert again.stop() == 0, again.log
    assert "Traceback" not in again.log


def test_resumed_conversation_sees_the_interruption(tmp_path: Path, workspace: Path) -> None:
    """What a resumed agent's model reads (conversation.rebuild) says the call was
    interrupted, from the journal's own end of it."""
    base = tmp_path / "d"
    daemon = start_daemon(base)
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace)).id
        c.append_agent_event(
            sid, pb.AgentEvent(conversation_id="conv1", prompt=pb.AgentPrompt(text="touch it"))
        )
        use = pb.AgentContentBlock(type="tool_use", id="toolu_r1", name="Bash")
        use.input.update({"command": "touch x"})
        c.append_agent_event(
            sid,
            pb.AgentEvent(conversation_id="conv1", message=pb.AgentMessage(turn=1, content=[use])),
        )
        watcher = c.attach(sid)
        assert watcher.wait_attached()
        threading.Thread(
            target=lambda: _quiet(
                lambda: c.run_tool(sid, "Bash", {"command": "touch x"}, "toolu_r1")
            ),
            daemon=True,
        ).start()
        next(e for e in watcher if e.HasField("permission_requested"))
        _wait_open(daemon.state_dir, 1, daemon)
        daemon.stop(signal.SIGKILL)
        watcher.cancel()
    again = start_daemon(base)
    try:
        with Client(again.socket, timeout=60) as c:
            rebuilt = rebuild(_journal(c, sid))
        assert rebuilt is not None
        answer = rebuilt.messages[-1]["content"][0]
        assert answer["type"] == "tool_result" and answer["tool_use_id"] == "toolu_r1"
        assert answer["is_error"] is True
        # The daemon's own end of the call, not the client's guess for a missing one.
        assert "agentd stopped" in str(answer["content"])
    finally:
        assert again.stop() == 0, again.log


def _quiet(fn) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(grpc.RpcError):
        fn()


ROUNDS = 5
CLOSES_PER_ROUND = 40


def test_acknowledged_close_is_never_reverted(tmp_path: Path, workspace: Path) -> None:
    """200 closes, acknowledged under concurrent load, across 5 kill -9s: every one of
    them is closed after the restart."""
    base = tmp_path / "d"
    rng = random.Random(1818)
    (workspace / "r.txt").write_text("read me\n")
    (workspace / "r.txt").chmod(0o644)
    acknowledged: set[str] = set()
    for _ in range(ROUNDS):
        _close_round(
            base, workspace, rng.randint(CLOSES_PER_ROUND // 2, CLOSES_PER_ROUND - 1), acknowledged
        )
    last = start_daemon(base)
    try:
        with Client(last.socket, timeout=60) as c:
            still_open = {s.id for s in c.list_sessions()}
        reverted = acknowledged & still_open
        assert not reverted, f"{len(reverted)} acknowledged closes came back open"
        assert len(acknowledged) >= ROUNDS * CLOSES_PER_ROUND // 2 - ROUNDS
    finally:
        assert last.stop() == 0, last.log


def _close_round(base: Path, workspace: Path, kill_after: int, acknowledged: set[str]) -> None:
    """Sessions closed from many threads under Read load; kill -9 right after the
    `kill_after`-th acknowledgment, while the other closes are in flight."""
    daemon = start_daemon(base)
    stop = threading.Event()
    lock = threading.Lock()
    acked = 0
    try:
        with Client(daemon.socket, timeout=60) as c:
            ids = [
                c.create_session(str(workspace), permission_mode="bypassPermissions").id
                for _ in range(CLOSES_PER_ROUND + 1)
            ]

            def load() -> None:
                with Client(daemon.socket, timeout=60) as own:
                    while not stop.is_set():
                        try:
                            own.run_tool(ids[0], "Read", {"file_path": str(workspace / "r.txt")})
                        except grpc.RpcError:
                            return

            def close(sid: str) -> None:
                nonlocal acked
                try:
                    c.close_session(sid)
                except grpc.RpcError:
                    return
                with lock:
                    acknowledged.add(sid)
                    acked += 1
                    if acked == kill_after:
                        daemon.proc.send_signal(signal.SIGKILL)

            loaders = [threading.Thread(target=load) for _ in range(2)]
            closers = [threading.Thread(target=close, args=(s,)) for s in ids[1:]]
            for t in loaders + closers:
                t.start()
            for t in closers:
                t.join(60)
            stop.set()
            for t in loaders:
                t.join(60)
    finally:
        daemon.stop(signal.SIGKILL)


def _start_fails(base: Path) -> str:
    """What `agentd serve` on `base` prints when it refuses to start (exit 2)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentd",
            "serve",
            "--socket",
            str(base / "run" / "agentd.sock"),
            "--state-dir",
            str(base / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out
    return out.stderr


def test_damaged_database_is_one_line_at_start(tmp_path: Path, workspace: Path) -> None:
    base = tmp_path / "d"
    daemon = start_daemon(base)
    with Client(daemon.socket, timeout=60) as c:
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        for n in range(300):
            prompt = pb.AgentPrompt(text=f"p{n} " * 50)
            c.append_agent_event(sid, pb.AgentEvent(conversation_id="c", prompt=prompt))
    assert daemon.stop() == 0
    db = Path(daemon.state_dir) / "agentd.db"
    size = db.stat().st_size
    assert size > 16 * 4096
    with open(db, "r+b") as f:  # garbage in the middle: pages of the journal
        f.seek(size // 2)
        f.write(b"\xa5" * 8192)
    log = _start_fails(base)
    assert "is damaged" in log and "quick_check" not in log.split("damaged", 1)[0]
    assert "Traceback" not in log, log
    lines = [line for line in log.splitlines() if "agentd:" in line]
    assert len(lines) == 1 and "mv " in lines[0], log

    with open(db, "r+b") as f:  # a garbage header: not a database at all
        f.write(b"this is no database" * 10)
    log = _start_fails(base)
    assert "Traceback" not in log, log
    assert any("agentd:" in line and "is damaged" in line for line in log.splitlines()), log


def test_deleted_database_is_reported_while_running(tmp_path: Path, workspace: Path) -> None:
    daemon = start_daemon(tmp_path / "d")
    try:
        db = Path(daemon.state_dir) / "agentd.db"
        with Client(daemon.socket, timeout=60) as c:
            sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
            db.unlink()
            # At once, not at the next periodic check: a writing call is refused, not
            # acknowledged into a journal the next start will not find.
            r = c.run_tool(sid, "Write", {"file_path": str(workspace / "w.txt"), "content": "x"})
            assert r.is_error and "was deleted" in r.text, r.text
            assert not (workspace / "w.txt").exists()
            read = c.run_tool(sid, "Glob", {"pattern": "*"})
            assert not read.is_error, read.text
        line = daemon.wait_for_log("was deleted while agentd runs")
        assert "restore it from a backup" in line
        with Client(daemon.socket, timeout=60) as c:
            problem = c.status().state.database_problem
        assert "was deleted" in problem
    finally:
        assert daemon.stop() == 0, daemon.log
    assert "Traceback" not in daemon.log, daemon.log
