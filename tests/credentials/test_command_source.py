"""A command source (`gh auth token`): its first line is the secret, run as the owner
in an environment of our making, and kept for its cache_seconds only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.credentials.config import _source
from agentd.credentials.sources import SourceError, Sources


def _counting(tmp_path: Path) -> list[str]:
    script = tmp_path / "token.sh"
    script.write_text(
        f'#!/bin/sh\necho x >> {tmp_path}/runs\necho "tok-$(wc -l < {tmp_path}/runs)"\n'
        'echo "HOME=$HOME PWD=$PWD" >&2\n'
    )
    script.chmod(0o755)
    return [str(script)]


def test_the_answer_is_kept_for_its_cache_seconds(tmp_path: Path) -> None:
    kept = _source({"name": "c", "command": _counting(tmp_path), "cache_seconds": 3600}, 0)
    sources = Sources({"c": kept}, str(tmp_path / "state"))
    assert sources.get("c", os.getuid()).password == "tok-1"
    assert sources.get("c", os.getuid()).password == "tok-1"
    fresh = _source({"name": "c", "command": _counting(tmp_path), "cache_seconds": 0}, 0)
    sources = Sources({"c": fresh}, str(tmp_path / "state"))
    assert sources.get("c", os.getuid()).password == "tok-2"
    assert sources.get("c", os.getuid()).password == "tok-3"


def test_a_failing_command_says_so_without_its_output(tmp_path: Path) -> None:
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho secret-ish\nexit 3\n")
    script.chmod(0o755)
    source = _source({"name": "c", "command": [str(script)]}, 0)
    with pytest.raises(SourceError, match="exit 3") as caught:
        Sources({"c": source}, str(tmp_path / "state")).get("c", os.getuid())
    assert "secret-ish" not in str(caught.value)
