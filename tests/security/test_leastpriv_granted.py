"""Paths outside the workspace that a decision granted stay searchable and listable
when the search runs in the session's sandbox (the sandbox shows them read-only)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd_client import Client

TOKEN = "granted-needle-5d2f"


@pytest.fixture(params=["/tmp", "/var/tmp"])
def outside(request: pytest.FixtureRequest) -> Iterator[Path]:
    # Under /tmp too: the sandbox mounts its own /tmp, so a granted path there must be
    # shown in it explicitly.
    path = Path(tempfile.mkdtemp(prefix="agentd-lp-granted-", dir=request.param))
    path.chmod(0o755)
    (path / "sub").mkdir()
    (path / "sub" / "notes.txt").write_text(f"{TOKEN}\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_granted_outside_paths_stay_searchable(
    client: Client, session_id: str, outside: Path
) -> None:
    grep = client.run_tool(
        session_id, "Grep", {"pattern": TOKEN, "path": str(outside), "output_mode": "content"}
    )
    assert not grep.is_error, grep.text
    assert f"{outside}/sub/notes.txt:1:{TOKEN}" in grep.text
    glob = client.run_tool(session_id, "Glob", {"pattern": "**/*.txt", "path": str(outside)})
    assert glob.text.strip() == f"{outside}/sub/notes.txt", glob.text
    ls = client.run_tool(session_id, "LS", {"path": str(outside)})
    assert "notes.txt" in ls.text, ls.text
    one = client.run_tool(
        session_id, "Grep", {"pattern": TOKEN, "path": str(outside / "sub" / "notes.txt")}
    )
    assert not one.is_error and str(outside / "sub" / "notes.txt") in one.text, one.text


def test_the_search_sandbox_writes_nothing(
    client: Client, session_id: str, workspace: Path
) -> None:
    # A pattern file is the only thing rg could be told to open for writing, and it
    # cannot: the search sees the workspace read-only. Nothing appears in the workspace.
    before = sorted(os.listdir(workspace))
    result = client.run_tool(session_id, "Grep", {"pattern": "x", "glob": "*"})
    assert not result.is_error, result.text
    assert sorted(os.listdir(workspace)) == before
