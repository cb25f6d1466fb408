"""Sessions' control groups (agentd/sandboxing/groups.py) across the daemon's life: a
task that outlives a restart stays in its session's group and the next daemon keeps
using that group; groups nobody owns any more are swept at start; the v2 layout (here
the hybrid machine's unified hierarchy, which holds no controller: placement, the
sandbox's view, kill and removal are tested; limits fall back to rlimits)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.sandboxing.groups import tree_name
from agentd_client import Client
from agentd_sandbox import cgroups
from tests.e2e.test_tasks_outlive import Node, _background, _session
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="groups are made by a root daemon")


def group_of(state_dir: str, sid: str, prefer: str = "auto") -> cgroups.Group:
    hierarchy = cgroups.detect(prefer)
    assert hierarchy is not None
    return cgroups.Tree(hierarchy, tree_name(state_dir)).group(sid)


def made_group(state_dir: str, sid: str) -> cgroups.Group:
    """A group as a daemon of `state_dir` would have made it."""
    tree = cgroups.Tree(cgroups.detect(), tree_name(state_dir))
    assert tree.setup() == []
    group = tree.group(sid)
    group.create(cgroups.GroupLimits(processes=8))
    return group


def commands_in(group: cgroups.Group) -> list[str]:
    found = []
    for pid in group.pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def wait_in_group(group: cgroups.Group, text: str) -> None:
    assert wait_until(lambda: any(text in c for c in commands_in(group)), 30), commands_in(group)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "d")
    try:
        yield n
    finally:
        n.cleanup()


@pytest.mark.skipif(cgroups.detect() is None, reason="no cgroup hierarchy here")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "stop"])
def test_a_task_keeps_its_group_across_a_restart(node: Node, workspace: Path, how: int) -> None:
    with node.client() as c:
        sid = _session(c, str(workspace))
        _background(c, sid, "sleep 4243.1")
        group = group_of(node.daemon.state_dir, sid)
        wait_in_group(group, "sleep 4243.1")
    node.restart(how)
    with node.client() as c:
        assert group.exists()  # the next daemon found it, did not sweep it
        wait_in_group(group, "sleep 4243.1")  # the task taken over is still in it
        _background(c, sid, "sleep 4243.2")  # and the session's next start joins it
        wait_in_group(group, "sleep 4243.2")
        pids = group.pids()
        c.close_session(sid)
    assert not group.exists()
    assert wait_until(lambda: not any(_alive(p) for p in pids), 10)


@pytest.mark.skipif(cgroups.detect() is None, reason="no cgroup hierarchy here")
def test_groups_of_sessions_no_longer_open_are_swept_at_start(
    tmp_path: Path, workspace: Path
) -> None:
    """A group a crash left of a session the database knows closed is removed by the
    next daemon of the same state dir; one of a session it does not know is left and
    reported (never removed: the database may have lost it); another daemon's tree is
    not touched."""
    mine = start_daemon(tmp_path / "mine")
    state = mine.state_dir
    with Client(mine.socket, timeout=60) as c:
        closed = c.create_session(str(workspace)).id
        c.close_session(closed)
    assert mine.stop() == 0
    left = made_group(state, closed)
    stray_id = uuid.uuid4().hex
    stray = made_group(state, stray_id)
    other = made_group(str(tmp_path / "elsewhere"), uuid.uuid4().hex)
    try:
        again = start_daemon(tmp_path / "mine")
        again.wait_for_log("removed the control groups of 1 sessions no longer open")
        line = again.wait_for_log("left the control groups of 1 sessions")
        assert stray_id in line and "not removed" in line
        assert not left.exists()
        assert stray.exists()
        assert other.exists()
        assert again.stop() == 0
        assert stray.exists()  # nor removed at the stop
    finally:
        stray.remove()
        other.remove()
        cgroups.Tree(other.hierarchy, tree_name(str(tmp_path / "elsewhere"))).remove_if_empty()
        cgroups.Tree(stray.hierarchy, tree_name(state)).remove_if_empty()


@pytest.fixture
def v2_daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    if cgroups.detect("v2") is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    config = tmp_path / "config.toml"
    config.write_text('session_cgroups = "v2"\nbash_processes = 77\n')
    daemon = start_daemon(tmp_path, ["--config", str(config)])
    yield daemon
    assert daemon.stop() == 0, daemon.log


def test_cgroup_v2_places_kills_and_removes(v2_daemon: DaemonProcess, workspace: Path) -> None:
    """On the unified hierarchy. Here it holds no controller (they are bound to v1), so
    what is tested is the placement, the sandbox's view, cgroup.kill and removal; the
    limits a v2 group lacks fall back to rlimits (bash_processes)."""
    with Client(v2_daemon.socket, timeout=60) as c:
        status = c.status()
        limits = dict(status.sandbox["session_limits"])
        assert limits["mode"] == "cgroup2", limits
        sid = c.create_session(str(workspace), permission_mode="bypassPermissions").id
        r = c.run_tool(sid, "Bash", {"command": "cat /proc/self/cgroup; ls -A /sys/fs/cgroup"})
        lines = r.text.strip().splitlines()  # its group is its root; no cgroupfs to see
        assert "0::/" in lines and all(line.endswith(":/") for line in lines), r.text
        _background(c, sid, "sleep 4244.1")
        group = group_of(v2_daemon.state_dir, sid, "v2")
        assert group.hierarchy.version == 2
        wait_in_group(group, "sleep 4244.1")
        sleeper = next(p for p in group.pids() if "sleep" in _cmdline(p))
        with open(f"/proc/{sleeper}/limits") as f:
            assert any(line.startswith("Max processes") and line.split()[2] == "77" for line in f)
        pids = group.pids()
        c.close_session(sid)
    assert not group.exists()
    assert wait_until(lambda: not any(_alive(p) for p in pids), 10)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(cgroups.detect() is None, reason="no cgroup hierarchy here")
def test_an_unsandboxed_command_runs_in_the_sessions_group(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    """dangerouslyDisableSandbox, approved: no sandbox, but the session's group still
    holds it (joined as root, before the drop to the session's uid)."""
    import threading

    from agentd_client.v1 import agentd_pb2 as pb

    request = pb.CreateSessionRequest(
        workspace_roots=[str(workspace)], permission_mode="bypassPermissions",
        allow_unsandboxed=True,
    )  # fmt: skip
    sid = client.stub.CreateSession(request, timeout=30).id
    stream = client.attach(sid)

    def answer() -> None:
        for event in stream:
            if event.WhichOneof("kind") == "permission_requested":
                client.resolve_permission(sid, event.permission_requested.request_id, "allow")
                return

    assert stream.wait_attached()
    threading.Thread(target=answer, daemon=True).start()
    try:
        r = client.run_tool(
            sid,
            "Bash",
            {"command": "id -u; cat /proc/self/cgroup", "dangerouslyDisableSandbox": True},
        )
    finally:
        stream.cancel()
    assert not r.is_error, r.text
    assert r.text.split()[0] != "0"
    group = group_of(daemon.state_dir, sid)
    lines = r.text.splitlines()[1:]
    for controller, directory in group.dirs.items():
        suffix = "/" + tree_name(daemon.state_dir) + "/" + sid
        assert any(controller in line and line.endswith(suffix) for line in lines), r.text
        assert os.path.isdir(directory)
    client.close_session(sid)
