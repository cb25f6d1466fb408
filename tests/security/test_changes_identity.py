"""Changes are known by the identity of the file changed, not by the name a writer used:
every name of a code-bearing file is that file (a hard link made in one call and
written in the next, a link a person made), a write through a shared mapping kept open
across calls raises no event and is still held, and what changed while no daemon
watched, or while events were lost, is held, never adopted as the new known good.

Every command here runs in the daemon's sandbox; the files are the person's own.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from agentd_client import Client
from tests.security._held import as_sandbox_user, held_paths
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

DENY = b'{"permissions": {"deny": ["Bash(curl:*)"]}}\n'
SETTINGS = "app/.claude/settings.json"

# A background task that maps the settings shared and writable, says so, waits for
# `go`, writes through the mapping (no write(2): no event), says so, and lives on.
MAPPER = textwrap.dedent(
    """\
    import mmap, os, time
    fd = os.open("app/.claude/settings.json", os.O_RDWR)
    m = mmap.mmap(fd, 0)
    os.close(fd)
    open("mapped", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
    m[0:1] = b"X"
    open("written", "w").close()
    time.sleep(300)
    """
)


@pytest.fixture
def sid(client: Client, workspace: Path) -> str:
    return client.create_session(str(workspace), permission_mode="bypassPermissions").id


def _plant(workspace: Path) -> Path:
    (workspace / "app" / ".claude").mkdir(parents=True)
    (workspace / SETTINGS).write_bytes(DENY)
    (workspace / "docs").mkdir()
    (workspace / "docs" / "index.md").write_text("# docs\n")
    as_sandbox_user(workspace)
    return workspace


@pytest.fixture
def existing(sid: str, workspace: Path) -> Path:
    return _plant(workspace)


def _start_mapper(client: Client, sid: str, ws: Path) -> str:
    (ws / "mapper.py").write_text(MAPPER)
    as_sandbox_user(ws)
    started = client.run_tool(
        sid, "Bash", {"command": "exec python3 mapper.py", "run_in_background": True}
    )
    task_id = started.text.split("with ID: ")[1].split(".")[0]
    wait_until(lambda: (ws / "mapped").exists(), 60, "the task mapped the settings")
    return task_id


def test_a_hard_link_made_in_one_call_cannot_write_the_file_in_the_next(
    client: Client, sid: str, existing: Path
) -> None:
    first = client.run_tool(sid, "Bash", {"command": f"ln {SETTINGS} docs/alias; echo done"})
    assert "done" in first.text, first.text
    assert str(existing / "docs" / "alias") in held_paths(first.text), first.text
    second = client.run_tool(sid, "Bash", {"command": "printf '{}' >> docs/alias; echo done"})
    assert "done" in second.text, second.text
    assert (existing / SETTINGS).read_bytes() == DENY


def test_a_write_through_another_name_is_a_write_of_the_file(
    client: Client, sid: str, existing: Path
) -> None:
    os.link(existing / SETTINGS, existing / "docs" / "alias")  # the person's, made earlier
    r = client.run_tool(sid, "Bash", {"command": "printf '{}' >> docs/alias; echo done"})
    assert "done" in r.text, r.text
    assert str(existing / SETTINGS) in held_paths(r.text), r.text
    assert (existing / SETTINGS).read_bytes() == DENY


def test_a_rename_over_it_through_a_link_is_held(client: Client, sid: str, existing: Path) -> None:
    command = f"ln {SETTINGS} keep && printf x > new && mv new {SETTINGS} && echo done"
    r = client.run_tool(sid, "Bash", {"command": command})
    assert "done" in r.text, r.text
    assert str(existing / SETTINGS) in held_paths(r.text), r.text
    assert (existing / SETTINGS).read_bytes() == DENY


def test_a_write_through_a_mapping_kept_open_across_calls_is_held(
    client: Client, sid: str, existing: Path
) -> None:
    task_id = _start_mapper(client, sid, existing)
    try:
        (existing / "go").touch()
        wait_until(lambda: (existing / "written").exists(), 60, "the task wrote")
        client.run_tool(sid, "Bash", {"command": "true"})
        wait_until(
            lambda: (existing / SETTINGS).read_bytes() == DENY,
            60,
            "the settings written through the mapping were put back",
        )
    finally:
        client.run_tool(sid, "TaskStop", {"task_id": task_id})
    r = client.run_tool(sid, "Bash", {"command": "true"})
    assert (existing / SETTINGS).read_bytes() == DENY, r.text


def test_a_change_made_by_a_task_while_the_daemon_was_stopped_is_held(
    tmp_path: Path, workspace: Path
) -> None:
    _plant(workspace)
    os.mkfifo(workspace / "go")
    as_sandbox_user(workspace)
    first = start_daemon(tmp_path / "d", keep_tasks=True)
    second: DaemonProcess | None = None
    try:
        with Client(first.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            client.run_tool(sid, "Bash", {"command": "true"})
            command = f"read line < go && printf '{{}}' > {SETTINGS} && touch written"
            client.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
        first.stop()  # the task lives on under its shim, and ends while no daemon runs
        with open(workspace / "go", "w") as fifo:
            fifo.write("go\n")
        wait_until(lambda: (workspace / "written").exists(), 60, "the task wrote")
        assert (workspace / SETTINGS).read_bytes() == b"{}"
        second = start_daemon(tmp_path / "d", keep_tasks=True, timeout=90)
        with Client(second.socket, timeout=60) as client:
            r = client.run_tool(sid, "Bash", {"command": "echo done"})
        assert str(workspace / SETTINGS) in held_paths(r.text), r.text
        assert "not watching" in r.text, r.text
        assert (workspace / SETTINGS).read_bytes() == DENY
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.stop()


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _host_watch_of(proc: DaemonProcess) -> int:
    """The pid of the daemon's host watch process (a descendant of the test's daemon)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"agentd.changes.hostwatch" not in f.read():
                    continue
        except OSError:
            continue
        pid = int(name)
        for _ in range(4):
            pid = _parent(pid)
            if pid == proc.proc.pid:
                return int(name)
    return 0


def test_a_host_watch_that_died_does_not_adopt_what_no_event_explains(
    tmp_path: Path, workspace: Path
) -> None:
    _plant(workspace)
    proc = start_daemon(tmp_path / "d")
    try:
        with Client(proc.socket, timeout=120) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            client.run_tool(sid, "Bash", {"command": "true"})
            task_id = _start_mapper(client, sid, workspace)
            mark = len(proc.log_lines)
            watcher = wait_until(lambda: _host_watch_of(proc), 30, "the host watch runs")
            os.kill(watcher, signal.SIGKILL)
            (workspace / "go").touch()
            wait_until(lambda: (workspace / "written").exists(), 60, "the task wrote")
            client.run_tool(sid, "Bash", {"command": "true"})
            proc.wait_for_log("events were lost", after=mark, timeout=60)
            wait_until(
                lambda: (workspace / SETTINGS).read_bytes() == DENY,
                60,
                "the settings written through the mapping were put back",
            )
            client.run_tool(sid, "TaskStop", {"task_id": task_id})
    finally:
        proc.stop()


def test_a_flood_of_ordinary_changes_is_not_held(client: Client, sid: str, existing: Path) -> None:
    command = (
        "python3 -c \"import os\nfor d in range(50):\n os.makedirs(f'build/{d}')\n"
        " for f in range(100): open(f'build/{d}/o{f}.o', 'w').write('x')\" && echo done"
    )
    r = client.run_tool(sid, "Bash", {"command": command, "timeout": 300_000})
    assert r.text.strip() == "done", r.text
    assert len(list((existing / "build").rglob("*.o"))) == 5000


def test_the_persons_own_edit_between_calls_is_theirs(
    client: Client, sid: str, existing: Path
) -> None:
    client.run_tool(sid, "Bash", {"command": "true"})  # the settings are known
    mine = b'{"permissions": {"deny": []}}\n'
    (existing / SETTINGS).write_bytes(mine)  # the person's editor: an event names it
    r = client.run_tool(sid, "Bash", {"command": "echo done"})
    assert r.text.strip() == "done", r.text
    assert (existing / SETTINGS).read_bytes() == mine


# A flood of events the kernel cannot merge (each a new name), past the change log cap
# of a daemon configured for 1 MiB (64 MiB by default), then the settings are written:
# the events past the cap are lost, so the write is found by a walk and held.
FLOOD = textwrap.dedent(
    """\
    import os
    os.makedirs("flood")
    for i in range(40000):
        open(f"flood/{i}", "w").close()
    with open("app/.claude/settings.json", "w") as f:
        f.write("{}")
    print("done")
    """
)


@pytest.mark.timeout(300)
def test_a_change_made_after_a_flood_lost_events_is_held(tmp_path: Path, workspace: Path) -> None:
    _plant(workspace)
    (workspace / "flood.py").write_text(FLOOD)
    as_sandbox_user(workspace)
    config = tmp_path / "agentd.toml"
    config.write_text(f"changes_log_bytes = {1024 * 1024}\n")
    daemon = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(daemon.socket, timeout=300) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            r = client.run_tool(sid, "Bash", {"command": "python3 flood.py", "timeout": 300_000})
        daemon.wait_for_log("lost file events", timeout=5)
        assert "done" in r.text, r.text
        assert str(workspace / SETTINGS) in held_paths(r.text), r.text
        assert (workspace / SETTINGS).read_bytes() == DENY
    finally:
        daemon.stop()
