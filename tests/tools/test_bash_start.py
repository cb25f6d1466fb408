"""A sandbox that fails before bash runs is built again: something the policy listed (a
host socket, an allow-listed file, a protected path) may vanish before bwrap mounts it,
and nothing of the command has run yet. A command that did start is never run twice."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from agentd.foundation.errors import ToolError
from agentd.runs.launch import START_ATTEMPTS
from agentd.sandboxing import policy as sandbox_policy
from agentd.tools.base import ToolResult
from tests.tools.direct import call_bash

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.fixture
def ws(workspace: Path) -> Path:
    """A workspace the sandbox's uid can reach (conftest's)."""
    return workspace


def _run(
    ws: Path, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch, failing: int
) -> tuple[ToolResult, int]:
    """Run `command` with the first `failing` sandbox starts given a bind whose source is
    gone (bwrap then fails before bash runs, as when a listed path vanishes)."""
    real = sandbox_policy.policy_for
    built = 0

    def policy_for(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        nonlocal built
        built += 1
        policy = real(*args, **kwargs)  # type: ignore[arg-type]
        if built <= failing:
            gone = tmp_path / f"vanished-{built}"
            policy.ro_binds = [*policy.ro_binds, (str(gone), str(ws / "vanished"))]
        return policy

    monkeypatch.setattr(sandbox_policy, "policy_for", policy_for)

    result = asyncio.run(call_bash(ws, tmp_path, command, session_id="s-start"))
    return result, built


def test_a_start_that_failed_before_bash_ran_is_retried(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, built = _run(ws, tmp_path, "echo ran >> runs.txt; echo done", monkeypatch, 2)
    assert not result.is_error, result.text_content()
    assert "done" in result.text_content()
    assert built == 3
    assert (ws / "runs.txt").read_text() == "ran\n"  # exactly once


def test_a_sandbox_that_never_starts_is_an_error_and_nothing_runs(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The executor turns a ToolError into an is_error result for the model.
    # bwrap's own words, or the launcher's when it opens the policy's paths (by descriptor).
    did_not_run = "could not start, so the command did not run: (bwrap|cannot open)"
    with pytest.raises(ToolError, match=did_not_run):
        _run(ws, tmp_path, "echo ran >> runs.txt", monkeypatch, START_ATTEMPTS)
    assert not (ws / "runs.txt").exists()


def test_a_command_that_ran_and_failed_is_not_run_again(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It prints what a bwrap failure prints and exits 1: it still ran, once.
    command = 'echo ran >> runs.txt; echo "bwrap: Cannot mkdir parents for /x" >&2; exit 1'
    result, built = _run(ws, tmp_path, command, monkeypatch, 0)
    assert result.is_error and "Exit code 1" in result.text_content()
    assert built == 1
    assert (ws / "runs.txt").read_text() == "ran\n"
