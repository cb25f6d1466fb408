"""Pre-images of files that existed before the agent touched them and that no other
source has, through the real daemon (agentd/changes/capture.py): copied before the
first writing command runs, within a budget, dropped when the file changes outside the
agent; and git's index trusted only for files that matched it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

from agentd.changes import capture
from agentd_client import Client
from agentd_client.v1 import agentd_pb2 as pb
from tests.support.daemon import start_daemon


def bash(client: Client, sid: str, command: str, call: str) -> str:
    return client.run_tool(sid, "Bash", {"command": command}, call).text


def before(client: Client, sid: str, call: str) -> dict[str, pb.FileImage]:
    diff = client.diff_checkpoint(sid, call, fmt="names")
    return {f.path: f.before for f in diff.files}


def made(workspace: Path, rel: str, data: bytes, mode: int = 0o644) -> Path:
    path = workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)
    owner = workspace.stat()
    for p in [path, *path.relative_to(workspace).parents]:
        os.lchown(workspace / p, owner.st_uid, owner.st_gid)
    return path


def test_a_truncating_redirect_over_an_untracked_file_is_undone_byte_exact(
    client: Client, session_id: str, workspace: Path
) -> None:
    original = bytes(range(256)) * 10
    made(workspace, "untracked_existing", original, 0o600)
    made(workspace, "deep/er/other.bin", b"other\n")
    bash(client, session_id, "echo x > untracked_existing; echo y > deep/er/other.bin", "t-trunc")
    got = before(client, session_id, "t-trunc")
    assert got["untracked_existing"].sha256 and not got["untracked_existing"].why
    done = client.restore_checkpoint(session_id, "t-trunc")
    assert done.applied, done.message
    assert (workspace / "untracked_existing").read_bytes() == original
    assert stat.S_IMODE((workspace / "untracked_existing").stat().st_mode) == 0o600
    assert (workspace / "deep/er/other.bin").read_bytes() == b"other\n"


def test_beyond_the_budget_the_diff_says_why_not(
    client: Client, session_id: str, workspace: Path
) -> None:
    made(workspace, "big.bin", b"\0" * (capture.MAX_FILE_BYTES + 1))
    made(workspace, "node_modules/pkg/index.js", b"module.exports = 1\n")
    bash(client, session_id, "echo x > big.bin; echo 2 > node_modules/pkg/index.js", "t-over")
    got = before(client, session_id, "t-over")
    assert got["big.bin"].why == "not restorable: not captured (files over 16 MiB are not copied)"
    assert got["node_modules/pkg/index.js"].why == (
        "not restorable: regenerable (not captured below node_modules/)"
    )
    names = client.diff_checkpoint(session_id, "t-over", fmt="names").text
    assert "big.bin  (not restorable: not captured" in names, names


def test_a_file_changed_outside_after_the_capture_is_not_put_back_from_it(
    client: Client, session_id: str, workspace: Path
) -> None:
    made(workspace, "p.txt", b"at the capture\n")
    bash(client, session_id, "echo first > first.txt", "t-first")  # the capture is taken
    (workspace / "p.txt").write_bytes(b"a person's edit\n")
    bash(client, session_id, "echo agent > p.txt", "t-p")
    got = before(client, session_id, "t-p")
    assert got["p.txt"].why == "no pre-image (not captured)", got["p.txt"]
    assert not got["p.txt"].sha256


def _git(workspace: Path, *argv: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(workspace)}
    subprocess.run(["git", "-c", "safe.directory=*", *argv], cwd=workspace, env=env, check=True)


def _repository(workspace: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        made(workspace, rel, data)
    _git(workspace, "init", "-q")
    _git(workspace, "add", *files)
    owner = workspace.stat()
    for dirpath, _, names in os.walk(workspace):
        for name in [*names, "."]:
            os.lchown(os.path.join(dirpath, name), owner.st_uid, owner.st_gid)


def test_a_tracked_file_edited_outside_before_the_call_is_not_given_the_index(
    client: Client, session_id: str, workspace: Path
) -> None:
    _repository(workspace, {"g.txt": b"in the index\n", "clean.txt": b"clean\n"})
    (workspace / "g.txt").write_bytes(b"edited outside agentd\n")
    bash(client, session_id, "echo agent > g.txt; echo agent > clean.txt", "t-g")
    got = before(client, session_id, "t-g")
    assert got["g.txt"].sha256 and got["clean.txt"].sha256
    done = client.restore_checkpoint(session_id, "t-g")
    assert done.applied, done.message
    assert (workspace / "g.txt").read_bytes() == b"edited outside agentd\n"
    assert (workspace / "clean.txt").read_bytes() == b"clean\n"


def test_a_tracked_file_edited_outside_after_the_capture_is_not_given_the_index(
    client: Client, session_id: str, workspace: Path
) -> None:
    _repository(workspace, {"h.txt": b"in the index\n"})
    bash(client, session_id, "echo first > first.txt", "t-first")  # the capture is taken
    (workspace / "h.txt").write_bytes(b"edited outside agentd\n")
    bash(client, session_id, "echo agent > h.txt", "t-h")
    got = before(client, session_id, "t-h")
    assert got["h.txt"].why == "no pre-image (not captured)", got["h.txt"]


def test_more_names_than_the_watch_pipe_holds_are_all_told_before_the_copy(
    tmp_path: Path, workspace: Path
) -> None:
    # ~160 KB of distinct names: the host watch takes them as its pipe drains, and no
    # event counts as lost (which would walk every workspace again).
    for i in range(3000):
        made(workspace, f"many/{i:05d}-a-rather-long-and-distinct-file-name.txt", b"x\n")
    made(workspace, "many/zzzz-told-last.txt", b"at the capture\n")
    proc = start_daemon(tmp_path / "d")
    try:
        with Client(proc.socket, timeout=120) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            bash(client, sid, "echo first > first.txt", "t-first")  # the capture is taken
            (workspace / "many/zzzz-told-last.txt").write_bytes(b"a person's edit\n")
            bash(client, sid, "echo agent > many/zzzz-told-last.txt", "t-last")
            got = before(client, sid, "t-last")
    finally:
        assert proc.stop() == 0, proc.log
    assert got["many/zzzz-told-last.txt"].why == "no pre-image (not captured)"
    assert "file events were lost" not in proc.log, proc.log[-2000:]


def test_past_the_configured_budget_a_file_says_so(tmp_path: Path, workspace: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        made(workspace, name, name.encode() + b"\n")
    config = tmp_path / "config.toml"
    config.write_text("checkpoint_capture_files = 2\n")
    proc = start_daemon(tmp_path / "d", ["--config", str(config)])
    try:
        with Client(proc.socket, timeout=60) as client:
            sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
            bash(client, sid, "for f in a b c; do echo x > $f.txt; done", "t-all")
            got = before(client, sid, "t-all")
    finally:
        assert proc.stop() == 0, proc.log
    whys = sorted(got[n].why for n in ("a.txt", "b.txt", "c.txt"))
    assert whys == [
        "",
        "",
        "not restorable: not captured (past the capture's budget of 2 files, 64 MiB)",
    ], whys


def test_a_daemon_killed_leaves_its_copies_to_the_next_one_to_remove(
    tmp_path: Path, workspace: Path
) -> None:
    made(workspace, "u.txt", b"before\n")
    first = start_daemon(tmp_path / "d")
    with Client(first.socket, timeout=60) as client:
        sid = client.create_session(str(workspace), permission_mode="bypassPermissions").id
        bash(client, sid, "echo x > u.txt", "t-x")
    packs = Path(first.state_dir) / "capture"
    assert [p.suffix for p in packs.iterdir()] == [".pack"]
    first.stop(signal.SIGKILL)
    second = start_daemon(tmp_path / "d")
    try:
        with Client(second.socket, timeout=60) as client:
            client.status()
            assert not packs.exists() or list(packs.iterdir()) == []
            # What the first daemon's checkpoint stored is the checkpoints' own: restorable.
            done = client.restore_checkpoint(sid, "t-x")
            assert done.applied, done.message
    finally:
        assert second.stop() == 0, second.log
    assert (workspace / "u.txt").read_bytes() == b"before\n"
