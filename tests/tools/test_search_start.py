"""A search whose sandbox failed before rg ran is started again (a host socket or a
listed path may vanish before bwrap mounts it); one that never starts is an error."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentd.runs import launch
from agentd.tools.search import ripgrep

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


@pytest.fixture
def ws(workspace: Path) -> Path:
    """A workspace the sandbox's uid can reach (conftest's)."""
    return workspace


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, int]:
    """Sandbox starts seen; the first `failing` get a bind whose source is gone."""
    seen = {"starts": 0, "failing": 0}
    real = ripgrep.spawn

    async def spawn(policy: Any, argv: list[str], *a: Any, **kw: Any) -> Any:
        seen["starts"] += 1
        if seen["starts"] <= seen["failing"]:
            gone = str(tmp_path / f"vanished-{seen['starts']}")
            policy = dataclasses.replace(policy, ro_binds=[*policy.ro_binds, (gone, "/vanished")])
        return await real(policy, argv, *a, **kw)

    monkeypatch.setattr(ripgrep, "spawn", spawn)
    return seen


@pytest.mark.parametrize("tool", ["Grep", "Glob"])
async def test_a_search_whose_sandbox_failed_to_start_is_retried(
    call: Any, ws: Path, starts: dict[str, int], tool: str
) -> None:
    (ws / "a.txt").write_text("needle\n")
    starts["failing"] = launch.START_ATTEMPTS - 1
    args = {"pattern": "needle"} if tool == "Grep" else {"pattern": "*.txt"}
    r = await call(tool, args)
    assert not r.is_error, r.text
    assert "a.txt" in r.text
    assert starts["starts"] == launch.START_ATTEMPTS


async def test_a_sandbox_that_never_starts_is_an_error(
    call: Any, ws: Path, starts: dict[str, int]
) -> None:
    (ws / "a.txt").write_text("needle\n")
    starts["failing"] = launch.START_ATTEMPTS
    r = await call("Grep", {"pattern": "needle"})
    # bwrap's own words, or the launcher's when it opens the policy's paths (by descriptor).
    assert r.is_error and ("bwrap" in r.text or "cannot open" in r.text), r.text
    assert starts["starts"] == launch.START_ATTEMPTS


async def test_no_matches_is_not_taken_for_a_failed_start(
    call: Any, ws: Path, starts: dict[str, int]
) -> None:
    (ws / "a.txt").write_text("hay\n")
    r = await call("Grep", {"pattern": "needle"})
    assert not r.is_error and starts["starts"] == 1
