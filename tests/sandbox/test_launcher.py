"""agentd-launch (agentd_sandbox/launcher.py, launch/agentd-launch.c): the chain in front
of bwrap in one exec, with every property of the argv chain it replaces: the identity
with its groups, the rlimits, no_new_privs, the outer pid namespace; a helper that is not
built, or that others may write, is not used; bad options start nothing."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from agentd_sandbox import Limits, launcher, spawn
from agentd_sandbox.runner import prepare
from tests.support.waiting import wait_until

from .conftest import policy, run_capture

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or launcher.helper() is None,
    reason="agentd-launch is for a root spawner, and built by `make launcher`",
)

STATUS = "grep -E '^(Uid|Gid|NoNewPrivs):' /proc/self/status; ulimit -n; ulimit -Hn; cat {}"
GROUP = 4242


@pytest.fixture
def group_only(ws: str) -> str:
    """A file only members of GROUP may read (inside bwrap's user namespace the group
    itself shows as unmapped: reading is the proof)."""
    path = os.path.join(ws, "group-only")
    with open(path, "w") as f:
        f.write("member\n")
    os.chown(path, 0, GROUP)
    os.chmod(path, 0o040)
    return path


def _prepared_argv(pol: object) -> list[str]:
    launch = prepare(pol, ["true"])
    launch.close()
    if launch.lifeline is not None:
        launch.lifeline.close()
    return launch.argv


def test_a_root_spawner_execs_agentd_launch_alone_in_front_of_bwrap(ws: str) -> None:
    argv = _prepared_argv(policy(ws, cgroup_procs=["/nonexistent/cgroup.procs"]))
    assert argv[0] == launcher.HELPER
    dash = argv.index("--")
    assert argv[dash + 1].endswith("bwrap")
    assert argv[1:3] == ["--cgroup", "/nonexistent/cgroup.procs"]
    assert not {"setpriv", "unshare", "prlimit", "sh", "nsenter"} & {
        os.path.basename(a) for a in argv
    }


async def test_the_command_runs_as_the_identity_with_its_limits(ws: str, group_only: str) -> None:
    pol = policy(ws, groups=[GROUP], limits=Limits(wall_seconds=20, open_files=321))
    res = await run_capture(pol, ["sh", "-c", STATUS.format(group_only)])
    assert res.rc == 0, res.err
    lines = res.out.split("\n")
    assert lines[0].split()[1:] == ["65534"] * 4  # real, effective, saved, fs
    assert lines[1].split()[1:] == ["65534"] * 4
    assert lines[2].split()[1:] == ["1"]  # no_new_privs
    assert lines[3:6] == ["321", "321", "member"]
    without = await run_capture(policy(ws), ["cat", group_only])
    assert without.rc != 0 and "member" not in without.out


async def test_bwrap_is_pid_1_of_an_outer_namespace(ws: str) -> None:
    proc = await spawn(policy(ws), ["sleep", "30"])
    try:
        outer = proc.pid
        assert wait_until(lambda: _children(outer), 10)
        (bwrap,) = _children(outer)
        with open(f"/proc/{bwrap}/status") as f:
            nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        assert nspid[-1] == "1" and len(nspid) >= 2, nspid
    finally:
        proc.kill()
        await proc.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


async def test_without_the_helper_the_argv_chain_does_the_same(
    ws: str, group_only: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(launcher, "HELPER", str(tmp_path / "not-built"))
    pol = policy(ws, groups=[GROUP], limits=Limits(wall_seconds=20, open_files=321))
    argv = _prepared_argv(pol)
    assert os.path.basename(argv[0]) == "setpriv"
    res = await run_capture(pol, ["sh", "-c", STATUS.format(group_only)])
    assert res.rc == 0, res.err
    assert res.out.split("\n")[3:6] == ["321", "321", "member"]


def test_a_helper_others_may_write_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    copy = tmp_path / "agentd-launch"
    shutil.copy(launcher.HELPER, copy)
    monkeypatch.setattr(launcher, "HELPER", str(copy))
    assert launcher.helper() == str(copy)
    copy.chmod(0o775)
    assert launcher.helper() is None
    copy.chmod(0o757)
    assert launcher.helper() is None
    copy.chmod(stat.S_IRUSR | stat.S_IWUSR)  # not executable
    assert launcher.helper() is None


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--uid", "0", "--gid", "0"], "refusing to run as uid or gid 0"),
        (["--uid", "65534"], "--uid and --gid go together"),
        (["--uid", "65534", "--gid", "65534", "--groups", "5,0"], "refusing gid 0"),
        (["--rlimit", "nofile=9:3"], "soft above hard"),
        (["--rlimit", "stack=1:1"], "unknown resource"),
        (["--uid", "-1", "--gid", "65534"], "bad uid"),
        (["--bogus", "x"], "unknown option"),
    ],
)
def test_bad_options_start_nothing(options: list[str], says: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    out = subprocess.run(
        [launcher.HELPER, *options, "--", "/usr/bin/touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 125 and says in out.stderr, out
    assert not marker.exists()


def test_a_program_that_cannot_be_run_is_127(tmp_path: Path) -> None:
    out = subprocess.run(
        [launcher.HELPER, "--pidns", "--", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 127 and "cannot start" in out.stderr, out


def test_a_helper_that_cannot_run_here_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A build for another libc (an image made elsewhere) fails to run: the argv chain
    starts sandboxes instead of every start failing."""
    broken = tmp_path / "agentd-launch"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    monkeypatch.setattr(launcher, "HELPER", str(broken))
    assert launcher.helper() is None
