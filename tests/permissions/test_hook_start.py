"""A hook whose sandbox ended before bash ran is started again (a path bwrap was to mount
may vanish after the policy listed it); a hook that ran is never run twice, whatever it
printed. Otherwise a deny hook would be skipped as a non-blocking failure."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.permissions import hooks
from agentd.permissions.settings import HookCommand
from agentd.runs import launch
from tests.sandbox.conftest import policy, sandbox_dir

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

DENY = (
    'echo ran >> runs.txt; echo \'{"hookSpecificOutput": {"permissionDecision": "deny", '
    '"permissionDecisionReason": "no"}}\''
)


@pytest.fixture
def ws() -> Iterator[str]:
    path = sandbox_dir("agentd-hook-ws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _factory(ws: str, tmp_path: Path, failing: int) -> tuple[Any, dict[str, int]]:
    """Policies whose first `failing` starts bind a source that is gone."""
    seen = {"built": 0}

    def build() -> Any:
        seen["built"] += 1
        p = policy(ws)
        if seen["built"] <= failing:
            gone = str(tmp_path / f"vanished-{seen['built']}")
            p = dataclasses.replace(p, ro_binds=[(gone, "/vanished")])
        return p

    return build, seen


async def test_a_hook_whose_sandbox_failed_to_start_runs_once_and_decides(
    ws: str, tmp_path: Path
) -> None:
    build, seen = _factory(ws, tmp_path, launch.START_ATTEMPTS - 1)
    run = await hooks.run_hook(HookCommand(DENY, 10, "test"), {}, build)
    assert hooks.pre_verdict(run).behavior == "deny"
    assert seen["built"] == launch.START_ATTEMPTS
    assert Path(ws, "runs.txt").read_text() == "ran\n"


async def test_a_hook_that_never_starts_fails_without_running(ws: str, tmp_path: Path) -> None:
    build, seen = _factory(ws, tmp_path, launch.START_ATTEMPTS)
    run = await hooks.run_hook(HookCommand(DENY, 10, "test"), {}, build)
    # Its path was gone at each start (found before bwrap ran, or by bwrap).
    assert run.exit_code not in (0, 2)
    assert "vanished" in run.error or "bwrap" in run.stderr, run
    assert seen["built"] == launch.START_ATTEMPTS
    assert not Path(ws, "runs.txt").exists()


async def test_a_hook_that_ran_and_failed_like_bwrap_is_not_run_again(
    ws: str, tmp_path: Path
) -> None:
    build, seen = _factory(ws, tmp_path, 0)
    command = 'echo ran >> runs.txt; echo "bwrap: Cannot mkdir /x" >&2; exit 1'
    run = await hooks.run_hook(HookCommand(command, 10, "test"), {}, build)
    assert run.exit_code == 1 and seen["built"] == 1
    assert Path(ws, "runs.txt").read_text() == "ran\n"
