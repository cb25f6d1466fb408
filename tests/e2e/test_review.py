"""Review mode through the real daemon: a writing Bash call runs on an overlay of the
workspace, its changes wait (ListPendingChanges, `agentctl review`), and a person
applies them (byte-exact, modes kept, a checkpoint of their own) or discards them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from agentd_client import Client
from tests.support import ctl
from tests.support.daemon import DaemonProcess, start_daemon
from tests.support.processes import processes_with
from tests.support.waiting import wait_for_event, wait_until
from tests.support.workspaces import SANDBOX_UID, reachable_workspace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="review mode needs a root daemon")


def _session(client: Client, workspace: Path) -> str:
    """A review session on `workspace`, whose files (made by the test) become the
    sandbox user's, as a workspace it works in is."""
    for dirpath, dirnames, filenames in os.walk(workspace):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), SANDBOX_UID, SANDBOX_UID)
    return client.create_session(
        str(workspace), permission_mode="bypassPermissions", review=True
    ).id


def _text(result: object) -> str:
    return "".join(b.text for b in result.content)  # type: ignore[attr-defined]


def _tree(root: Path) -> dict[str, tuple[str, int, bytes]]:
    out: dict[str, tuple[str, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), b"")
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return out


def test_a_sed_waits_then_applies_byte_exact_with_modes(
    client: Client, daemon: DaemonProcess, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("alpha\nbeta\n")
    sid = _session(client, workspace)
    command = "sed -i s/alpha/ALPHA/ f.txt; printf '\\x00\\xff' > bin; chmod 751 bin"
    result = client.run_tool(sid, "Bash", {"command": command}, "r-1")
    assert "wait" in _text(result) and "~f.txt" in _text(result) and "+bin" in _text(result)
    assert (workspace / "f.txt").read_text() == "alpha\nbeta\n"
    assert not (workspace / "bin").exists()

    pending = client.list_pending_changes(sid)
    assert pending.id and pending.tool_use_id == "r-1"
    assert "-alpha" in pending.text and "+ALPHA" in pending.text
    assert {(f.path, f.change) for f in pending.files} == {("f.txt", "changed"), ("bin", "added")}

    refused = client.run_tool(sid, "Bash", {"command": "touch other"}, "r-2")
    assert refused.is_error and "review" in _text(refused)
    refused = client.run_tool(sid, "Write", {"file_path": str(workspace / "w"), "content": "x"})
    assert refused.is_error and "review" in _text(refused)
    seen = client.run_tool(sid, "Bash", {"command": "cat f.txt"}, "r-3")  # read-only: runs
    assert not seen.is_error and "alpha" in _text(seen)

    done = client.resolve_pending_changes(sid, pending.id, "apply")
    assert done.applied and done.checkpoint
    assert (workspace / "f.txt").read_text() == "ALPHA\nbeta\n"
    assert (workspace / "bin").read_bytes() == b"\x00\xff"
    assert stat.S_IMODE((workspace / "bin").stat().st_mode) == 0o751
    assert (workspace / "bin").stat().st_uid == SANDBOX_UID  # written as the session's identity
    assert not client.list_pending_changes(sid).id

    # The apply is the call's checkpoint: a rewind undoes it.
    client.rewind_to_call(sid, "r-1")
    assert (workspace / "f.txt").read_text() == "alpha\nbeta\n"
    assert not (workspace / "bin").exists()


def test_a_pending_rm_rf_and_a_discard_leave_the_workspace_untouched(
    client: Client, workspace: Path
) -> None:
    tree = workspace / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "a").write_text("a")
    (tree / "b").write_text("b")
    os.symlink("b", tree / "l")
    (workspace / "keep").write_text("keep")
    before = _tree(workspace)
    sid = _session(client, workspace)
    result = client.run_tool(sid, "Bash", {"command": "rm -rf tree; echo x >> keep"}, "rm-1")
    assert not result.is_error, _text(result)
    assert _tree(workspace) == before
    pending = client.list_pending_changes(sid, fmt="names")
    assert ("tree", "deleted") in {(f.path, f.change) for f in pending.files}
    done = client.resolve_pending_changes(sid, pending.id, "discard")
    assert done.discarded and not done.applied
    assert _tree(workspace) == before
    assert not client.list_pending_changes(sid).id
    again = client.run_tool(sid, "Bash", {"command": "rm -rf tree"}, "rm-2")
    assert not again.is_error
    applied = client.resolve_pending_changes(sid, client.list_pending_changes(sid).id, "apply")
    assert applied.applied, applied.message
    assert not tree.exists() and (workspace / "keep").read_text() == "keep"


def test_a_directory_replaced_whole_deletes_what_it_held(client: Client, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "old").write_text("old")
    (workspace / "d" / "gone").write_text("gone")
    sid = _session(client, workspace)
    client.run_tool(sid, "Bash", {"command": "rm -rf d && mkdir d && echo new > d/new"}, "op-1")
    pending = client.list_pending_changes(sid)
    done = client.resolve_pending_changes(sid, pending.id, "apply")
    assert done.applied, done.message
    assert sorted(os.listdir(workspace / "d")) == ["new"]


def test_apply_is_refused_over_a_path_changed_since(client: Client, workspace: Path) -> None:
    (workspace / "f").write_text("1")
    sid = _session(client, workspace)
    client.run_tool(sid, "Bash", {"command": "echo 2 > f"}, "cf-1")
    (workspace / "f").write_text("person's edit")
    pending = client.list_pending_changes(sid)
    refused = client.resolve_pending_changes(sid, pending.id, "apply")
    assert not refused.applied and "changed in the workspace" in refused.message
    assert (workspace / "f").read_text() == "person's edit"
    forced = client.resolve_pending_changes(sid, pending.id, "apply", force=True)
    assert forced.applied and (workspace / "f").read_text() == "2\n"


def test_background_and_unsandboxed_commands_are_refused(client: Client, workspace: Path) -> None:
    sid = _session(client, workspace)
    bg = client.run_tool(sid, "Bash", {"command": "touch x", "run_in_background": True})
    assert bg.is_error and "background" in _text(bg)
    assert not (workspace / "x").exists()


def test_two_terminals_see_the_review_event_and_agentctl_reviews(
    client: Client, daemon: DaemonProcess, workspace: Path
) -> None:
    sid = _session(client, workspace)
    after = client.get_session(sid).last_seq
    with ThreadPoolExecutor(2) as pool:  # two terminals attached, following live
        seen = [
            pool.submit(
                wait_for_event,
                client,
                sid,
                lambda e: e.WhichOneof("kind") == "files_changed",
                after,
            )
            for _ in range(2)
        ]
        client.run_tool(sid, "Bash", {"command": "printf 'hi\\n' > $'\\e[31mred'"}, "ev-1")
        for future in seen:
            event = future.result()
            assert event.files_changed.action == "pending review"
            assert event.files_changed.tool_use_id == "ev-1"
    shown = ctl.run("--socket", daemon.socket, "review", sid)
    assert shown.returncode == 0, shown.stderr
    assert "+hi" in shown.stdout and "\x1b" not in shown.stdout
    as_json = json.loads(ctl.run("--socket", daemon.socket, "review", sid, "--json").stdout)
    assert as_json["tool_use_id"] == "ev-1"
    applied = ctl.run("--socket", daemon.socket, "review", sid, "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"]
    assert (workspace / "\x1b[31mred").read_text() == "hi\n"
    nothing = ctl.run("--socket", daemon.socket, "review", sid)
    assert "nothing waits" in nothing.stdout


def test_rpc_inputs_are_checked(client: Client, workspace: Path) -> None:
    sid = _session(client, workspace)
    plain = client.create_session(str(workspace), permission_mode="bypassPermissions").id
    for call in (
        lambda: client.resolve_pending_changes(sid, 1, "frobnicate"),
        lambda: client.resolve_pending_changes(sid, 0, "apply"),
        lambda: client.resolve_pending_changes(sid, 99, "apply"),
        lambda: client.list_pending_changes(plain),
        lambda: client.list_pending_changes(sid, fmt="bogus"),
        lambda: client.resolve_pending_changes(sid, 1, "apply", by="x\0y"),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.details()  # one line that says what to do


def test_a_command_at_its_timeout_is_stopped_and_what_it_wrote_waits(
    client: Client, workspace: Path
) -> None:
    sid = _session(client, workspace)
    args = {"command": "echo early > t; sleep 60", "timeout": 1000}
    result = client.run_tool(sid, "Bash", args, "to-1")
    assert "background" not in _text(result) and "wait" in _text(result)
    assert not (workspace / "t").exists()
    assert [f.path for f in client.list_pending_changes(sid).files] == ["t"]


def test_in_a_git_repository_only_what_the_command_wrote_waits(
    client: Client, session_id: str, workspace: Path
) -> None:
    made = client.run_tool(session_id, "Bash", {"command": "git init -q . && echo ok"})
    assert "ok" in _text(made), _text(made)
    shutil.rmtree(workspace / ".git" / "hooks")  # a missing hooks dir is made read-only
    sid = _session(client, workspace)
    command = "echo x > x; git add x; git -c user.name=a -c user.email=a@b commit -qm m"
    client.run_tool(sid, "Bash", {"command": command}, "git-1")
    assert [f.path for f in client.list_pending_changes(sid).files] == ["x"]
    # The git directory, bound onto itself elsewhere, is read-only here: nothing of the
    # command reaches it.
    assert not (workspace / ".git" / "index").exists()
    assert not (workspace / ".git" / "hooks").exists()


def _views() -> list[str]:
    """Overlay mounts of review views in this mount namespace (the daemon's)."""
    with open("/proc/self/mountinfo") as f:
        lines = [line.split() for line in f]
    return [parts[4] for parts in lines if "/review/" in parts[4] and "overlay" in parts]


@pytest.mark.timeout(240)
def test_views_a_killed_daemon_left_are_removed_by_the_next(tmp_path: Path) -> None:
    workspace = reachable_workspace()
    base = tmp_path / "d"
    first = start_daemon(base)
    try:
        with Client(first.socket, timeout=60) as c:
            sid = _session(c, workspace)

            def run() -> None:
                with contextlib.suppress(grpc.RpcError):
                    c.run_tool(sid, "Bash", {"command": "echo x > y; sleep 7331.61"})

            call = threading.Thread(target=run, daemon=True)
            call.start()
            wait_until(lambda: _views(), 60, "a review view mounted for the call")
    finally:
        first.stop(signal.SIGKILL)
    assert _views()
    second = start_daemon(base)
    try:
        second.wait_for_log("review view(s) a stopped daemon left were removed")
        assert not _views()
        assert not (workspace / "y").exists()
    finally:
        second.stop()
        shutil.rmtree(workspace, ignore_errors=True)


def test_a_second_writing_call_while_one_runs_is_refused(client: Client, workspace: Path) -> None:
    sid = _session(client, workspace)
    mine = str(workspace)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            client.run_tool, sid, "Bash", {"command": "echo 1 > one; sleep 7331.62 & wait"}
        )
        wait_until(lambda: processes_with("sleep 7331.62"), 60, "the first command running")
        second = client.run_tool(sid, "Bash", {"command": "echo 2 > two"}, "second")
        assert second.is_error and "being made or wait for review" in _text(second)
        written = client.run_tool(sid, "Write", {"file_path": f"{mine}/w", "content": "x"})
        assert written.is_error and "being made or wait" in _text(written)
        assert not os.path.exists(os.path.join(mine, "two"))
        for pid in processes_with("sleep 7331.62"):
            os.kill(pid, signal.SIGKILL)
        first.result()
    assert [f.path for f in client.list_pending_changes(sid).files] == ["one"]
